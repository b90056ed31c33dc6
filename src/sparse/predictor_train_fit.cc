// Training one predictor width: weighted binary cross-entropy on sigmoid(score), Adam on shuffled
// mini-batches, learning rate on a cosine decay. Backward pass, with G = dLoss/dscore:
//
//   gW2t[rank, n_ff]   = hiddenᵀ · G
//   gH[n, rank]        = (G · W2) ⊙ (hidden > 0)
//   gW1t[n_embd, rank] = xᵀ · gH
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "sparse/predictor_train_internal.h"

namespace hearth::sparse::train {
namespace {

constexpr double kLrFloor = 0.05;  // the cosine ends at 5% of the peak rather than 0

// Kaiming-uniform for the relu layer (hidden units of unit second moment for unit inputs), then
// fan-in scaling so that initial scores have unit variance and the sigmoid is not saturated.
Network init_network(int64_t n_embd, int64_t rank, int64_t n_ff, Rng& rng) {
  Network net{n_embd, rank, n_ff, std::vector<float>(n_embd * rank),
              std::vector<float>(rank * n_ff)};
  const float b1 = std::sqrt(6.0f / static_cast<float>(n_embd));
  const float b2 = std::sqrt(3.0f / static_cast<float>(rank));
  for (float& w : net.w1t) w = b1 * (2.0f * rng.uniform() - 1.0f);
  for (float& w : net.w2t) w = b2 * (2.0f * rng.uniform() - 1.0f);
  return net;
}

// Overwrites score[rows, n_ff] with dLoss/dscore of the batch's mean loss and returns the summed
// (unscaled) loss. Per-row sums are added in row order so the total does not depend on threads.
double loss_and_grad(cpu::ThreadPool& pool, const uint8_t* fired, int64_t rows, int64_t n_ff,
                     float pos_weight, float* score, float* terms, std::vector<double>& row_loss) {
  const float scale = 1.0f / static_cast<float>(rows * n_ff);
  auto task = [&](int ith, int nth) {
    const auto [r0, r1] = cpu::split_range(rows, ith, nth);
    for (int64_t r = r0; r < r1; ++r) {
      row_loss[r] =
          bce_row(n_ff, fired + r * n_ff, pos_weight, scale, score + r * n_ff, terms + r * n_ff);
    }
  };
  pool.run(task);
  return std::accumulate(row_loss.begin(), row_loss.begin() + rows, 0.0);
}

void shuffle(std::vector<int64_t>& order, Rng& rng) {
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
}

// Buffers of one mini-batch step, sized once.
struct Step {
  Step(int64_t batch, int64_t n_embd, int64_t rank, int64_t n_ff)
      : x(batch * n_embd),
        fired(batch * n_ff),
        hidden(batch * rank),
        score(batch * n_ff),
        terms(batch * n_ff),
        grad_hidden(batch * rank),
        grad_w1t(n_embd * rank),
        grad_w2t(rank * n_ff),
        w2(n_ff * rank) {}
  std::vector<float> x;            // [batch, n_embd]  scaled inputs
  std::vector<uint8_t> fired;      // [batch, n_ff]
  std::vector<float> hidden;       // [batch, rank]    relu(x · w1t)
  std::vector<float> score;        // [batch, n_ff]    scores, then dLoss/dscore
  std::vector<float> terms;        // [batch, n_ff]    loss of every (sample, neuron)
  std::vector<float> grad_hidden;  // [batch, rank]
  std::vector<float> grad_w1t;     // [n_embd, rank]
  std::vector<float> grad_w2t;     // [rank, n_ff]
  std::vector<float> w2;           // [n_ff, rank]     w2t transposed for the backward product
  std::vector<double> row_loss;    // [batch]
};

void gather(const PredictorSamples& s, const FitSettings& f, const int64_t* idx, int64_t rows,
            Step& st) {
  const int64_t n_embd = s.n_embd, n_ff = s.n_ff;
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = s.x.data() + idx[r] * n_embd;
    float* dst = st.x.data() + r * n_embd;
    for (int64_t k = 0; k < n_embd; ++k) dst[k] = src[k] * f.input_scale[k];
    std::copy_n(s.fired.data() + idx[r] * n_ff, n_ff, st.fired.data() + r * n_ff);
  }
}

// One Adam step on one mini-batch; returns the summed loss.
double train_step(cpu::ThreadPool& pool, Network& net, Step& st, int64_t rows, float pos_weight,
                  Adam& adam1, Adam& adam2, float lr, int64_t step) {
  const int64_t n_embd = net.n_embd, rank = net.rank, n_ff = net.n_ff;
  forward(pool, net.w1t.data(), net.w2t.data(), n_embd, rank, n_ff, st.x.data(), rows,
          st.hidden.data(), st.score.data());
  const double loss = loss_and_grad(pool, st.fired.data(), rows, n_ff, pos_weight, st.score.data(),
                                    st.terms.data(), st.row_loss);
  const float* grad = st.score.data();  // [rows, n_ff]
  gemm(pool, rank, n_ff, rows, MatView{st.hidden.data(), 1, rank}, grad, n_ff, st.grad_w2t.data(),
       n_ff);
  transpose(net.w2t.data(), rank, n_ff, st.w2.data());
  gemm(pool, rows, rank, n_ff, MatView{grad, n_ff, 1}, st.w2.data(), rank, st.grad_hidden.data(),
       rank);
  for (int64_t i = 0; i < rows * rank; ++i) {
    if (st.hidden[i] <= 0.0f) st.grad_hidden[i] = 0.0f;
  }
  gemm(pool, n_embd, rank, rows, MatView{st.x.data(), 1, n_embd}, st.grad_hidden.data(), rank,
       st.grad_w1t.data(), rank);
  adam1.update(net.w1t.data(), st.grad_w1t.data(), lr, step);
  adam2.update(net.w2t.data(), st.grad_w2t.data(), lr, step);
  return loss;
}

}  // namespace

Network fit_rank(cpu::ThreadPool& pool, const PredictorSamples& s, const PredictorTrainOptions& o,
                 const FitSettings& f, int64_t rank, std::vector<float>& loss,
                 const std::function<void(int64_t, int, int, float)>& progress) {
  // Each width draws from its own stream, so its result does not depend on the other candidates.
  Rng rng(o.seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(rank)));
  Network net = init_network(s.n_embd, rank, s.n_ff, rng);
  const int64_t batch = std::min(o.batch, f.n_train);
  Step st(batch, s.n_embd, rank, s.n_ff);
  st.row_loss.resize(batch);
  Adam adam1(net.w1t.size()), adam2(net.w2t.size());
  std::vector<int64_t> order(f.n_train);
  std::iota(order.begin(), order.end(), 0);

  const int64_t steps_per_epoch = (f.n_train + batch - 1) / batch;
  const double total_steps = static_cast<double>(steps_per_epoch) * o.epochs;
  int64_t step = 0;
  loss.clear();
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    shuffle(order, rng);
    double epoch_loss = 0;
    for (int64_t b0 = 0; b0 < f.n_train; b0 += batch) {
      const int64_t rows = std::min(batch, f.n_train - b0);
      gather(s, f, order.data() + b0, rows, st);
      const double decay =
          0.5 * (1.0 + std::cos(std::numbers::pi * static_cast<double>(step) / total_steps));
      const float lr = static_cast<float>(o.learning_rate * (kLrFloor + (1.0 - kLrFloor) * decay));
      ++step;
      epoch_loss += train_step(pool, net, st, rows, f.pos_weight, adam1, adam2, lr, step);
    }
    loss.push_back(static_cast<float>(epoch_loss / static_cast<double>(f.n_train * s.n_ff)));
    if (progress) progress(rank, epoch + 1, o.epochs, loss.back());
  }
  return net;
}

}  // namespace hearth::sparse::train
