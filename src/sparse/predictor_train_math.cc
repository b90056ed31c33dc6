// The dense math of the predictor trainer: matrix products, relu network forward, Adam.
// Plain loops that g++ -O3 vectorises; the inference ops are not used because training needs
// transposed products and exact reproducibility rather than quantised weights.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "sparse/predictor_train_internal.h"

namespace hearth::sparse::train {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float Rng::uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }

uint64_t Rng::below(uint64_t n) { return next() % n; }

namespace {

// Four rows of C share each load of a row of B, and a column tile of 4 x kColTile floats of C
// stays in L1 while k runs.
constexpr int64_t kRowBlock = 4;
constexpr int64_t kColTile = 256;

// c_r[0, n) += x_r * b[0, n) for four rows r at once.
inline void axpy4(int64_t n, float x0, float x1, float x2, float x3, const float* __restrict b,
                  float* __restrict c0, float* __restrict c1, float* __restrict c2,
                  float* __restrict c3) {
  for (int64_t j = 0; j < n; ++j) {
    const float bj = b[j];
    c0[j] += x0 * bj;
    c1[j] += x1 * bj;
    c2[j] += x2 * bj;
    c3[j] += x3 * bj;
  }
}

inline void axpy1(int64_t n, float x0, const float* __restrict b, float* __restrict c0) {
  for (int64_t j = 0; j < n; ++j) c0[j] += x0 * b[j];
}

// C[i0 .. i0 + 4, j0 .. j0 + nj) += A[i0 .. i0 + 4, :] · B[:, j0 .. j0 + nj)
void tile4(int64_t k, MatView a, int64_t i0, const float* b, int64_t ldb, float* c, int64_t ldc,
           int64_t nj) {
  float* c0 = c + i0 * ldc;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* ak = a.data + i0 * a.row_stride + kk * a.col_stride;
    const float x0 = ak[0], x1 = ak[a.row_stride], x2 = ak[2 * a.row_stride],
                x3 = ak[3 * a.row_stride];
    if (x0 == 0.0f && x1 == 0.0f && x2 == 0.0f && x3 == 0.0f) continue;
    axpy4(nj, x0, x1, x2, x3, b + kk * ldb, c0, c0 + ldc, c0 + 2 * ldc, c0 + 3 * ldc);
  }
}

// The same for the one to three rows left after the last full block.
void tile1(int64_t k, MatView a, int64_t i, const float* b, int64_t ldb, float* c, int64_t ldc,
           int64_t nj) {
  for (int64_t kk = 0; kk < k; ++kk) {
    const float x0 = a.data[i * a.row_stride + kk * a.col_stride];
    if (x0 != 0.0f) axpy1(nj, x0, b + kk * ldb, c + i * ldc);
  }
}

// exp(-a) for a >= 0 (clamped at 87, where it underflows towards 0 anyway). libm's expf and
// log1pf are scalar calls, and branches on random labels mispredict; together they cost more than
// the matrix products at small widths. These are branch-free float arithmetic that vectorises,
// within 1e-7 relative of libm, and as deterministic. Selections are done on the bits, because
// with -ftrapping-math g++ will not if-convert float comparisons.
inline float exp_neg(float a) {
  constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693145752f, kLn2Lo = 1.42860677e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to integer
  // Non-negative floats order like their bit patterns.
  const float x =
      -std::bit_cast<float>(std::min(std::bit_cast<int32_t>(a), std::bit_cast<int32_t>(87.0f)));
  const float n = (x * kLog2e + kRound) - kRound;  // in [-126, 0]
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;   // |r| <= ln2 / 2
  // Taylor to r^7: the first term left out is below 2e-8 relative.
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// log1p(e) for e in [0, 1] as 2 atanh(t), t = e / (2 + e) <= 1/3: the odd series needs terms only
// up to t^15 and stays exact for tiny e, where log(1 + e) would round to 0.
inline float log1p_unit(float e) {
  const float t = e / (2.0f + e), t2 = t * t;
  float p = 1.0f / 15;
  p = p * t2 + 1.0f / 13;
  p = p * t2 + 1.0f / 11;
  p = p * t2 + 1.0f / 9;
  p = p * t2 + 1.0f / 7;
  p = p * t2 + 1.0f / 5;
  p = p * t2 + 1.0f / 3;
  p = p * t2 + 1.0f;
  return 2.0f * t * p;
}

}  // namespace

double bce_row(int64_t n, const uint8_t* fired, float pos_weight, float scale, float* score,
               float* terms) {
  for (int64_t j = 0; j < n; ++j) {
    // With m = -s for positives and s for negatives, the loss is w * softplus(m), where
    // softplus(m) = max(m, 0) + log1p(exp(-|s|)), and its gradient is w * (sigmoid(s) - y).
    const float s = score[j];
    const float y = static_cast<float>(fired[j]);
    const float e = exp_neg(std::fabs(s));
    const float inv = 1.0f / (1.0f + e);  // sigmoid(|s|); sigmoid(-|s|) = e * inv
    const int32_t negative = std::bit_cast<int32_t>(s) >> 31;  // all ones when s < 0
    const float sigmoid = std::bit_cast<float>((std::bit_cast<int32_t>(e * inv) & negative) |
                                               (std::bit_cast<int32_t>(inv) & ~negative));
    const float w = 1.0f + (pos_weight - 1.0f) * y;
    const float m = s - 2.0f * y * s;
    terms[j] = w * (0.5f * (m + std::fabs(m)) + log1p_unit(e));
    score[j] = w * (sigmoid - y) * scale;
  }
  // Eight running sums in a fixed order: vectorisable, and the same whatever the thread split.
  constexpr int64_t kLanes = 8;
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += terms[j + l];
  }
  double sum = 0;
  for (float v : lanes) sum += v;
  for (; j < n; ++j) sum += terms[j];
  return sum;
}

void gemm(cpu::ThreadPool& pool, int64_t m, int64_t n, int64_t k, MatView a, const float* b,
          int64_t ldb, float* c, int64_t ldc) {
  // Blocks are aligned to absolute rows, so which rows share a block (and so which zero terms are
  // skipped) does not depend on the number of threads.
  const int64_t n_blocks = (m + kRowBlock - 1) / kRowBlock;
  auto task = [&](int ith, int nth) {
    const auto [b0, b1] = cpu::split_range(n_blocks, ith, nth);
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t i0 = blk * kRowBlock, rows = std::min(kRowBlock, m - i0);
      for (int64_t i = i0; i < i0 + rows; ++i) std::fill_n(c + i * ldc, n, 0.0f);
      for (int64_t j0 = 0; j0 < n; j0 += kColTile) {
        const int64_t nj = std::min(kColTile, n - j0);
        if (rows == kRowBlock) {
          tile4(k, a, i0, b + j0, ldb, c + j0, ldc, nj);
        } else {
          for (int64_t i = i0; i < i0 + rows; ++i) tile1(k, a, i, b + j0, ldb, c + j0, ldc, nj);
        }
      }
    }
  };
  pool.run(task);
}

void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 32;  // keeps both the rows read and the rows written in cache
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

void forward(cpu::ThreadPool& pool, const float* w1t, const float* w2t, int64_t n_embd,
             int64_t rank, int64_t n_ff, const float* x, int64_t n, float* hidden, float* score) {
  gemm(pool, n, rank, n_embd, MatView{x, n_embd, 1}, w1t, rank, hidden, rank);
  for (int64_t i = 0; i < n * rank; ++i) hidden[i] = std::max(hidden[i], 0.0f);
  gemm(pool, n, n_ff, rank, MatView{hidden, rank, 1}, w2t, n_ff, score, n_ff);
}

void Adam::update(float* param, const float* grad, float lr, int64_t step) {
  constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;
  const float c1 = 1.0f - std::pow(kBeta1, static_cast<float>(step));
  const float c2 = 1.0f - std::pow(kBeta2, static_cast<float>(step));
  const float step_size = lr / c1, inv_c2 = 1.0f / c2;
  const size_t n = m.size();
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = kBeta1 * m[i] + (1.0f - kBeta1) * g;
    v[i] = kBeta2 * v[i] + (1.0f - kBeta2) * g * g;
    param[i] -= step_size * m[i] / (std::sqrt(v[i] * inv_c2) + kEps);
  }
}

}  // namespace hearth::sparse::train
