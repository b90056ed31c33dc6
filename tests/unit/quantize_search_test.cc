// Q4_0 with the exact (weighted) least-squares search (hearth quantize's default): valid blocks
// that never have a larger squared error than ggml's reference rounding; as good as a brute-force
// scalar search over a fine grid of scales; and with importance weights, a lower weighted error
// than plain rounding or the unweighted search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quantize.h"

namespace hearth {
namespace {

// sum_j w_j (x_j - y_j)^2 over n values of x and the dequantized row (w = nullptr: all ones).
double row_error(const float* x, const void* q, int64_t n, const float* w = nullptr) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(DType::Q4_0, q, y.data(), n);
  double e = 0;
  for (int64_t j = 0; j < n; ++j) e += (w ? w[j] : 1.0) * (x[j] - y[j]) * (x[j] - y[j]);
  return e;
}

double block_error(const float* x, const BlockQ4_0& b) { return row_error(x, &b, 32); }

// The scalar reference: for 4000 inverse scales on each side, codes rounded to nearest and the
// weighted least-squares scale for them (rounded to f16 as stored); the least error found.
double brute_force_error(const float* x, const float* w) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  double best = INFINITY;
  for (int sign : {1, -1}) {
    for (int i = 1; i <= 4000; ++i) {
      const double is = sign * (9.0 / amax) * i / 4000.0;
      double num = 0, den = 0;
      int q[32];
      for (int j = 0; j < 32; ++j) {
        q[j] = static_cast<int>(std::clamp(std::nearbyint(x[j] * is), -8.0, 7.0));
        num += w[j] * x[j] * q[j];
        den += w[j] * q[j] * q[j];
      }
      if (den == 0) continue;
      const float d = fp16_to_fp32(fp32_to_fp16(static_cast<float>(num / den)));
      double e = 0;
      for (int j = 0; j < 32; ++j) e += w[j] * (x[j] - d * q[j]) * (x[j] - d * q[j]);
      best = std::min(best, e);
    }
  }
  return best;
}

TEST(QuantizeSearch, NeverWorseThanTheReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double ref_total = 0, search_total = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    float x[32];
    for (float& v : x) v = normal(rng) * (trial % 7 + 1) * 0.01f;
    if (trial % 3 == 0) x[trial % 32] *= 6.0f;  // one outlier
    BlockQ4_0 ref, got;
    quantize_block_q4_0(x, &ref);
    quantize_block_q4_0_search(x, nullptr, &got);
    const double er = block_error(x, ref), eg = block_error(x, got);
    EXPECT_LE(eg, er * (1 + 1e-6) + 1e-12) << "trial " << trial;
    ref_total += er;
    search_total += eg;
  }
  // Across blocks the search is better, not just never worse.
  EXPECT_LT(search_total, 0.99 * ref_total);
}

TEST(QuantizeSearch, MatchesABruteForceScalarSearch) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::exponential_distribution<float> expo(1.0f);
  for (int trial = 0; trial < 300; ++trial) {
    float x[32], w[32];
    for (int j = 0; j < 32; ++j) {
      x[j] = normal(rng) * 0.05f;
      w[j] = trial % 2 ? expo(rng) * expo(rng) : 1.0f;  // heavy-tailed importance, or none
    }
    if (trial % 5 == 0) x[trial % 32] *= 8.0f;
    BlockQ4_0 got;
    quantize_block_q4_0_search(x, w, &got);
    const double brute = brute_force_error(x, w);
    // The sweep is exact over all real scales; the grid only samples them (and both round the
    // scale to f16), so the sweep may win but never lose by more than rounding noise.
    EXPECT_LE(row_error(x, &got, 32, w), brute * (1 + 1e-5) + 1e-12) << "trial " << trial;
  }
}

TEST(QuantizeSearch, RowsOfOddBlockCountsAreTheirBlocks) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int64_t n : {32, 96, 160, 224}) {
    std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      x[j] = normal(rng);
      w[j] = 0.1f + static_cast<float>(j % 7);
    }
    std::vector<BlockQ4_0> row(static_cast<size_t>(n / 32));
    quantize_row_search(DType::Q4_0, x.data(), w.data(), row.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      BlockQ4_0 one;
      quantize_block_q4_0_search(x.data() + b * 32, w.data() + b * 32, &one);
      EXPECT_EQ(0, std::memcmp(&one, &row[static_cast<size_t>(b)], sizeof one)) << n << " " << b;
    }
  }
  float x[33] = {};
  BlockQ4_0 out[2];
  EXPECT_THROW(quantize_row_search(DType::Q4_0, x, nullptr, out, 33), Error);
}

// Generated "layers": weights times activations whose mean squares vary by column over two orders
// of magnitude, as real inputs do. The error that matters for y = W x is sum_j E[x_j^2] dW_j^2.
TEST(QuantizeSearch, ImportanceWeightsLowerTheWeightedError) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::lognormal_distribution<float> scale(0.0f, 1.2f);
  constexpr int64_t kCols = 96, kRows = 64;
  std::vector<float> imp(kCols);
  for (float& v : imp) v = scale(rng) * scale(rng);
  double e_ref = 0, e_plain = 0, e_weighted = 0;
  std::vector<BlockQ4_0> q(kCols / 32);
  std::vector<float> x(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (float& v : x) v = normal(rng) * 0.02f;
    quantize_row(DType::Q4_0, x.data(), q.data(), kCols);
    e_ref += row_error(x.data(), q.data(), kCols, imp.data());
    quantize_row_search(DType::Q4_0, x.data(), nullptr, q.data(), kCols);
    e_plain += row_error(x.data(), q.data(), kCols, imp.data());
    quantize_row_search(DType::Q4_0, x.data(), imp.data(), q.data(), kCols);
    e_weighted += row_error(x.data(), q.data(), kCols, imp.data());
  }
  EXPECT_LT(e_plain, e_ref);
  EXPECT_LT(e_weighted, 0.9 * e_plain) << e_ref << " " << e_plain << " " << e_weighted;
}

TEST(QuantizeSearch, DegenerateBlocks) {
  float zeros[32] = {};
  BlockQ4_0 b;
  quantize_block_q4_0_search(zeros, nullptr, &b);
  EXPECT_EQ(block_error(zeros, b), 0.0);
  float one[32] = {};
  one[17] = -3.5f;
  quantize_block_q4_0_search(one, nullptr, &b);
  EXPECT_LT(block_error(one, b), 1e-6);
  float same[32];
  for (float& v : same) v = 0.25f;
  quantize_block_q4_0_search(same, nullptr, &b);
  EXPECT_LT(block_error(same, b), 1e-6);
  // All weight on zero-valued elements: no scale is better than another; still a valid block.
  float w[32] = {};
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = j < 16 ? 0.0f : 0.1f * j;
  for (int j = 0; j < 16; ++j) w[j] = 1.0f;
  quantize_block_q4_0_search(x, w, &b);
  EXPECT_EQ(row_error(x, &b, 32, w), 0.0);
}

TEST(QuantizeSearch, RowsOfOtherTypesAreUnchanged) {
  float x[64];
  for (int j = 0; j < 64; ++j) x[j] = std::sin(0.3f * j);
  uint8_t a[128], b[128];
  quantize_row(DType::Q8_0, x, a, 64);
  quantize_row_search(DType::Q8_0, x, nullptr, b, 64);
  EXPECT_EQ(0, std::memcmp(a, b, row_bytes(DType::Q8_0, 64)));
}

// The quick fit (for copies made at load) of Q4_K and Q5_K: other bytes than the reference's,
// within a few percent of its squared error on odd block counts; types without one are the
// reference's bytes.
TEST(QuantizeQuick, NearTheReferenceWithFewerCandidates) {
  constexpr int64_t n = 3 * 256;
  std::mt19937 rng(7);
  std::student_t_distribution<float> t(5.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = 0.02f * t(rng);
  const auto error = [&](DType type, const std::vector<uint8_t>& q) {
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(type, q.data(), y.data(), n);
    double e = 0;
    for (int64_t j = 0; j < n; ++j) e += (x[j] - y[j]) * (x[j] - y[j]);
    return e;
  };
  for (const DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::vector<uint8_t> ref(static_cast<size_t>(row_bytes(type, n)));
    std::vector<uint8_t> quick(ref.size());
    quantize_row(type, x.data(), ref.data(), n);
    quantize_row_quick(type, x.data(), quick.data(), n);
    const bool has_quick = type == DType::Q4_K || type == DType::Q5_K;
    EXPECT_EQ(std::memcmp(ref.data(), quick.data(), ref.size()) != 0, has_quick);
    EXPECT_LT(error(type, quick), 1.05 * error(type, ref));
  }
}

}  // namespace
}  // namespace hearth
