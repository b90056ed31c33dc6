// The block quantizers of core/quantize_blocks.h through quantize_row / quantize_row_search: the
// round trip through dequantize_row stays within a per-type error bound, importance weights lower
// the weighted error, degenerate rows come back exactly, every stored code stays in range.
// Bit-exact dequantization of hand-built blocks is in dequantize_blocks_test.cc.
#include "core/quantize_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "common/kernel_test_util.h"
#include "core/error.h"
#include "core/quantize.h"

namespace hearth {
namespace {

struct TypeBound {
  DType type;
  // Relative RMS error bounds (sqrt(sum (x - y)^2 / sum x^2)) on random_floats (normal with 1 in
  // 64 values 8x larger): reference and search. Measured values (mean of 4 rows) are 8-12%
  // lower: q4_1 0.099 / 0.090, q5_0 0.071 / 0.070, q5_1 0.048 / 0.043, iq4_nl 0.110 / 0.108,
  // q2_k 0.348 / 0.295, q3_k 0.197 / 0.194, q4_k 0.093 / 0.093, q5_k 0.046 / 0.046,
  // q6_k 0.027 / 0.027, iq4_xs 0.112 / 0.109.
  double reference, search;
  // Largest error of one value as a fraction of its block's largest magnitude: a code that
  // wrapped around its bit field would cost about the whole range. Measured: about 2/3 of these.
  double worst;
};

const TypeBound kTypes[] = {
    {DType::Q4_1, 0.110, 0.100, 0.12},   {DType::Q5_0, 0.078, 0.077, 0.09},
    {DType::Q5_1, 0.053, 0.048, 0.06},   {DType::IQ4_NL, 0.121, 0.119, 0.15},
    {DType::Q2_K, 0.385, 0.325, 0.45},   {DType::Q3_K, 0.218, 0.214, 0.20},
    {DType::Q4_K, 0.103, 0.102, 0.10},   {DType::Q5_K, 0.052, 0.051, 0.06},
    {DType::Q6_K, 0.030, 0.030, 0.025},  {DType::IQ4_XS, 0.124, 0.121, 0.09},
};

std::string name_of(DType t) { return std::string(dtype_name(t)); }

// An odd number of blocks: 9 super-blocks of 256, or 71 blocks of 32.
int64_t odd_length(DType t) { return dtype_block_size(t) == 256 ? 9 * 256 : 71 * 32; }

std::vector<float> round_trip(DType t, const std::vector<float>& x, const float* w, bool search) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, n)));
  if (search) {
    quantize_row_search(t, x.data(), w, q.data(), n);
  } else {
    quantize_row(t, x.data(), q.data(), n);
  }
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const float* w) {
  double e = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = static_cast<double>(x[i]) - y[i];
    e += (w ? w[i] : 1.0) * r * r;
  }
  return e;
}

double relative_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double s = 0.0;
  for (const float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(weighted_error(x, y, nullptr) / s);
}

TEST(QuantizeBlocks, RoundTripErrorIsBounded) {
  for (const TypeBound& tb : kTypes) {
    const int64_t n = odd_length(tb.type);
    double ref_sum = 0.0, search_sum = 0.0, worst = 0.0;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto x = test::random_floats(n, seed * 97, 0.02f);
      const auto yr = round_trip(tb.type, x, nullptr, false);
      const auto ys = round_trip(tb.type, x, nullptr, true);
      ref_sum += relative_rms(x, yr);
      search_sum += relative_rms(x, ys);
      // The search keeps the reference's block whenever that is better: never worse in total.
      EXPECT_LE(weighted_error(x, ys, nullptr), weighted_error(x, yr, nullptr)) << name_of(tb.type);
      // No value far off: a wrapped code would cost about the block's whole range.
      const int64_t bs = dtype_block_size(tb.type);
      for (int64_t b = 0; b < n / bs; ++b) {
        float amax = 0.0f;
        for (int64_t j = 0; j < bs; ++j) amax = std::max(amax, std::fabs(x[b * bs + j]));
        for (int64_t j = b * bs; j < (b + 1) * bs; ++j) {
          worst = std::max({worst, static_cast<double>(std::fabs(x[j] - yr[j]) / amax),
                            static_cast<double>(std::fabs(x[j] - ys[j]) / amax)});
          ASSERT_TRUE(std::isfinite(yr[j]) && std::isfinite(ys[j])) << name_of(tb.type);
          ASSERT_LE(std::fabs(x[j] - yr[j]), tb.worst * amax) << name_of(tb.type) << " at " << j;
          ASSERT_LE(std::fabs(x[j] - ys[j]), tb.worst * amax) << name_of(tb.type) << " at " << j;
        }
      }
    }
    std::printf("%-7s relative RMS error: reference %.4f, search %.4f; worst value %.3f of amax\n",
                name_of(tb.type).c_str(), ref_sum / 4, search_sum / 4, worst);
    EXPECT_LT(ref_sum / 4, tb.reference) << name_of(tb.type);
    EXPECT_LT(search_sum / 4, tb.search) << name_of(tb.type);
  }
}

// Importance weights spread over four orders of magnitude, as an imatrix's mean squares are.
std::vector<float> random_importance(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& v : w) v = std::exp(normal(rng));
  return w;
}

TEST(QuantizeBlocks, ImportanceWeightsLowerTheWeightedError) {
  for (const TypeBound& tb : kTypes) {
    const int64_t n = odd_length(tb.type);
    const auto x = test::random_floats(n, 5, 1.0f);
    const auto w = random_importance(n, 6);
    const double plain = weighted_error(x, round_trip(tb.type, x, nullptr, true), w.data());
    const double weighted = weighted_error(x, round_trip(tb.type, x, w.data(), true), w.data());
    std::printf("%-7s weighted error: unweighted search %.4g, weighted %.4g (%.0f%%)\n",
                name_of(tb.type).c_str(), plain, weighted, 100.0 * weighted / plain);
    EXPECT_LT(weighted, 0.95 * plain) << name_of(tb.type);
  }
}

TEST(QuantizeBlocks, ZeroAndConstantRows) {
  for (const TypeBound& tb : kTypes) {
    const int64_t n = 3 * dtype_block_size(tb.type);
    for (const bool search : {false, true}) {
      const std::vector<float> zero(static_cast<size_t>(n), 0.0f);
      for (const float y : round_trip(tb.type, zero, nullptr, search)) {
        ASSERT_EQ(y, 0.0f) << name_of(tb.type);
      }
      // All-zero importance is treated as no importance.
      const auto x = test::random_floats(n, 9, 1.0f);
      EXPECT_EQ(round_trip(tb.type, x, zero.data(), true), round_trip(tb.type, x, nullptr, true))
          << name_of(tb.type);
      for (const float c : {0.37f, -1.5f, 0.05f}) {
        const std::vector<float> flat(static_cast<size_t>(n), c);
        for (const float y : round_trip(tb.type, flat, nullptr, search)) {
          // f16 scales (and the 6-bit sub-block scales times them) hold c to a few parts in 1e3.
          ASSERT_NEAR(y, c, 4e-3 * std::fabs(c)) << name_of(tb.type) << " c=" << c << " search " << search;
        }
      }
    }
  }
}

TEST(QuantizeBlocks, RowLengthMustHoldWholeBlocks) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> y(4096);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), y.data(), 300), Error);
  EXPECT_THROW(quantize_row_search(DType::Q6_K, x.data(), nullptr, y.data(), 300), Error);
  EXPECT_THROW(quantize_row(DType::Q5_0, x.data(), y.data(), 48), Error);
  // Not one of these types: the dispatch says so, writing nothing.
  EXPECT_FALSE(quantize_row_blocks(DType::Q8_0, x.data(), y.data(), 32));
  EXPECT_FALSE(quantize_row_blocks_search(DType::F16, x.data(), nullptr, y.data(), 32));
}

}  // namespace
}  // namespace hearth
