// GPTQ for Q4_0 rows (core/quantize_gptq.h): against a scalar reference written the original way
// (inverse Hessian updated column by column, OBQ's form, no Cholesky), on rows of odd block
// counts; and on generated correlated activations it lowers the output error (x - y)^T H (x - y)
// below the plain search and the search weighted by the diagonal of H (llama.cpp's imatrix).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quantize.h"
#include "core/quantize_gptq.h"

namespace hearth {
namespace {

// Activations with a shared direction (a large mean, as residual streams have) plus noise whose
// scale varies by column; returns the Gram matrix sum x x^T over `rows` samples.
std::vector<float> correlated_gram(int64_t cols, int rows, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dir(cols), scale(cols);
  for (int64_t j = 0; j < cols; ++j) {
    dir[j] = normal(rng);
    scale[j] = 0.2f + std::fabs(normal(rng));
  }
  std::vector<double> g(static_cast<size_t>(cols * cols), 0.0);
  std::vector<float> x(cols);
  for (int r = 0; r < rows; ++r) {
    const float a = 2.0f + 0.5f * normal(rng);
    for (int64_t j = 0; j < cols; ++j) x[j] = a * dir[j] + scale[j] * normal(rng);
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j < cols; ++j) g[i * cols + j] += static_cast<double>(x[i]) * x[j];
    }
  }
  return std::vector<float>(g.begin(), g.end());
}

// (x - y)^T H (x - y) with H = gram / count, undamped.
double output_error(const std::vector<float>& gram, double count, const float* x,
                    const std::vector<BlockQ4_0>& y, int64_t cols) {
  std::vector<float> yq(cols);
  dequantize_row(DType::Q4_0, y.data(), yq.data(), cols);
  double s = 0;
  for (int64_t i = 0; i < cols; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      s += (x[i] - yq[i]) * (gram[i * cols + j] / count) * (x[j] - yq[j]);
    }
  }
  return s;
}

// The scalar reference: H damped as the class does, inverted by Gauss-Jordan; per column, the
// block's scale from the current row at the block's start, the code, and OBQ's update of the
// remaining weights and of the inverse with that column removed.
std::vector<BlockQ4_0> reference_gptq(const std::vector<float>& gram, double count,
                                      const float* x, int64_t n) {
  std::vector<double> h(static_cast<size_t>(n * n));
  double mean = 0;
  for (int64_t i = 0; i < n * n; ++i) h[i] = gram[i] / count;
  for (int64_t i = 0; i < n; ++i) mean += h[i * n + i] / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) h[i * n + i] += 0.01 * mean;
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) inv[i * n + i] = 1;
  for (int64_t c = 0; c < n; ++c) {  // Gauss-Jordan without pivoting (H is positive definite)
    const double p = h[c * n + c];
    for (int64_t k = 0; k < n; ++k) {
      h[c * n + k] /= p;
      inv[c * n + k] /= p;
    }
    for (int64_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = h[r * n + c];
      for (int64_t k = 0; k < n; ++k) {
        h[r * n + k] -= f * h[c * n + k];
        inv[r * n + k] -= f * inv[c * n + k];
      }
    }
  }
  std::vector<double> w(x, x + n);
  std::vector<BlockQ4_0> y(static_cast<size_t>(n / 32));
  for (int64_t b = 0; b < n / 32; ++b) {
    float block[32];
    for (int j = 0; j < 32; ++j) block[j] = static_cast<float>(w[b * 32 + j]);
    quantize_block_q4_0_search(block, nullptr, &y[b]);
    const double d = fp16_to_fp32(y[b].d);
    for (int j = 0; j < 32; ++j) {
      const int64_t c = b * 32 + j;
      const double q = std::clamp(std::nearbyint(d != 0 ? w[c] / d : 0.0), -8.0, 7.0);
      const int code = static_cast<int>(q) + 8;
      if (j < 16) {
        y[b].qs[j] = static_cast<uint8_t>((y[b].qs[j] & 0xf0) | code);
      } else {
        y[b].qs[j - 16] = static_cast<uint8_t>((y[b].qs[j - 16] & 0x0f) | (code << 4));
      }
      const double e = (w[c] - d * q) / inv[c * n + c];
      for (int64_t k = c + 1; k < n; ++k) w[k] -= e * inv[c * n + k];
      // Remove column c from the inverse (OBQ): inv -= inv[:, c] inv[c, :] / inv[c, c].
      const double icc = inv[c * n + c];
      for (int64_t r = c + 1; r < n; ++r) {
        for (int64_t k = c + 1; k < n; ++k) inv[r * n + k] -= inv[r * n + c] * inv[c * n + k] / icc;
      }
    }
  }
  return y;
}

TEST(QuantizeGptq, MatchesTheScalarReferenceOnOddBlockCounts) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int64_t n : {32, 96, 160}) {
    const std::vector<float> gram = correlated_gram(n, 400, rng);
    const GptqQ4_0 gptq(gram.data(), n, 400);
    int same = 0, total = 0;
    for (int row = 0; row < 20; ++row) {
      std::vector<float> x(n);
      for (float& v : x) v = 0.05f * normal(rng);
      std::vector<BlockQ4_0> got(n / 32);
      gptq.quantize_row(x.data(), got.data());
      const std::vector<BlockQ4_0> ref = reference_gptq(gram, 400, x.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        for (int j = 0; j < 16; ++j) same += got[b].qs[j] == ref[b].qs[j];
        total += 16;
      }
      // The class also refits the scales, only ever lowering the error.
      EXPECT_LE(output_error(gram, 400, x.data(), got, n),
                output_error(gram, 400, x.data(), ref, n) * (1 + 1e-4) + 1e-12) << n;
    }
    // Same codes up to float rounding of the two formulations (a rare tie flips).
    EXPECT_GE(same, total * 97 / 100) << n;
  }
}

TEST(QuantizeGptq, LowersTheOutputErrorOnCorrelatedActivations) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kCols = 128;
  const std::vector<float> gram = correlated_gram(kCols, 1000, rng);
  std::vector<float> diag(kCols);
  for (int64_t j = 0; j < kCols; ++j) diag[j] = gram[j * kCols + j] / 1000;
  const GptqQ4_0 gptq(gram.data(), kCols, 1000);
  double e_plain = 0, e_diag = 0, e_gptq = 0;
  std::vector<BlockQ4_0> y(kCols / 32);
  for (int row = 0; row < 64; ++row) {
    std::vector<float> x(kCols);
    for (float& v : x) v = 0.05f * normal(rng);
    quantize_row_search(DType::Q4_0, x.data(), nullptr, y.data(), kCols);
    e_plain += output_error(gram, 1000, x.data(), y, kCols);
    quantize_row_search(DType::Q4_0, x.data(), diag.data(), y.data(), kCols);
    e_diag += output_error(gram, 1000, x.data(), y, kCols);
    gptq.quantize_row(x.data(), y.data());
    e_gptq += output_error(gram, 1000, x.data(), y, kCols);
    // The class's own measure uses the damped H: a little larger, never smaller.
    const double undamped = output_error(gram, 1000, x.data(), y, kCols);
    EXPECT_GE(gptq.row_error(x.data(), y.data()), undamped * (1 - 1e-9));
    EXPECT_LE(gptq.row_error(x.data(), y.data()), undamped * 1.2);
  }
  EXPECT_LT(e_gptq, 0.7 * e_plain) << e_plain << " " << e_diag << " " << e_gptq;
  EXPECT_LT(e_gptq, 0.7 * e_diag) << e_plain << " " << e_diag << " " << e_gptq;
}

TEST(QuantizeGptq, RejectsUnusableStatistics) {
  std::vector<float> gram(33 * 33, 0.0f);
  EXPECT_THROW(GptqQ4_0(gram.data(), 33, 10), Error);     // not whole blocks
  gram.assign(32 * 32, 0.0f);
  EXPECT_THROW(GptqQ4_0(gram.data(), 32, 10), Error);     // no energy at all
  for (int j = 0; j < 32; ++j) gram[j * 32 + j] = 1.0f;
  EXPECT_THROW(GptqQ4_0(gram.data(), 32, 0), Error);      // no rows
  EXPECT_NO_THROW(GptqQ4_0(gram.data(), 32, 10));
  // A column never used (zero row and column) still gets codes.
  gram[5 * 32 + 5] = 0.0f;
  const GptqQ4_0 g(gram.data(), 32, 10);
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.1f * (j - 16);
  BlockQ4_0 y;
  g.quantize_row(x, &y);
  float back[32];
  dequantize_row(DType::Q4_0, &y, back, 32);
  for (int j = 0; j < 32; ++j) EXPECT_NEAR(back[j], x[j], 0.2f) << j;
}

}  // namespace
}  // namespace hearth
