// Internals of the predictor trainer (predictor_train.h), shared by its .cc files: the dense
// matrix products, the RNG, Adam, and the training of one width.
//
// The network is kept transposed while training, W1t [n_embd, rank] and W2t [rank, n_ff], so that
// every product is written as rows of C accumulating scaled rows of B (C[i,:] += a * B[k,:]):
// that inner loop auto-vectorises without reassociating a sum, and every element of C is summed
// over k in ascending order whatever the thread split, which keeps training deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "sparse/predictor_train.h"

namespace hearth::sparse::train {

// A 64-bit generator we own, so results do not depend on the standard library's distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();             // splitmix64
  float uniform();             // [0, 1)
  uint64_t below(uint64_t n);  // [0, n)

 private:
  uint64_t state_;
};

// A matrix operand: element (i, k) is data[i * row_stride + k * col_stride], so a transposed
// view costs nothing.
struct MatView {
  const float* data;
  int64_t row_stride, col_stride;
};

// C[m, n] = A[m, k] · B[k, n]; B, C row-major with leading dims ldb, ldc. Rows of C are split
// across the pool in fixed blocks of four; (i, k) pairs with A = 0 are skipped, which pays off
// after a relu.
void gemm(cpu::ThreadPool& pool, int64_t m, int64_t n, int64_t k, MatView a, const float* b,
          int64_t ldb, float* c, int64_t ldc);

// dst[cols, rows] = src[rows, cols]ᵀ
void transpose(const float* src, int64_t rows, int64_t cols, float* dst);

// hidden[n, rank] = relu(x[n, n_embd] · w1t);  score[n, n_ff] = hidden · w2t
void forward(cpu::ThreadPool& pool, const float* w1t, const float* w2t, int64_t n_embd,
             int64_t rank, int64_t n_ff, const float* x, int64_t n, float* hidden, float* score);

// Weighted binary cross-entropy on sigmoid(score) for one row of n neurons, positives weighing
// pos_weight: overwrites score with scale * dLoss/dscore and returns the row's summed loss.
// terms [n] is scratch.
double bce_row(int64_t n, const uint8_t* fired, float pos_weight, float scale, float* score,
               float* terms);

// Adam with bias correction over one parameter tensor.
struct Adam {
  explicit Adam(size_t n) : m(n, 0.0f), v(n, 0.0f) {}
  // param -= lr * m̂ / (sqrt(v̂) + eps) after folding grad into the moments; step counts from 1.
  void update(float* param, const float* grad, float lr, int64_t step);
  std::vector<float> m, v;
};

// A predictor in the training layout. fc1/fc2 of TrainedPredictor are its transposes.
struct Network {
  int64_t n_embd = 0, rank = 0, n_ff = 0;
  std::vector<float> w1t;  // [n_embd, rank]
  std::vector<float> w2t;  // [rank, n_ff]
};

struct FitSettings {
  int64_t n_train = 0;  // samples [0, n_train) are trained on
  float pos_weight = 1;
  std::vector<float> input_scale;  // [n_embd] multiplies x while training (folded into fc1 after)
};

// Trains one width on the training split; fills loss with the mean loss of every epoch.
Network fit_rank(cpu::ThreadPool& pool, const PredictorSamples& s, const PredictorTrainOptions& o,
                 const FitSettings& f, int64_t rank, std::vector<float>& loss,
                 const std::function<void(int64_t, int, int, float)>& progress);

// Calls visit(score [rows, n_ff], fired [rows, n_ff], rows) over samples [begin, end) in blocks,
// with the scores of predictor p.
void score_samples(cpu::ThreadPool& pool, const TrainedPredictor& p, const PredictorSamples& s,
                   int64_t begin, int64_t end,
                   const std::function<void(const float*, const uint8_t*, int64_t)>& visit);

}  // namespace hearth::sparse::train
