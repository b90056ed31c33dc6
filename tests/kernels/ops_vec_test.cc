// ops/vec.h: element-wise helpers must give the scalar reference's bits on every path; reductions
// are checked against double-precision sums with tolerances scaled by the sum of magnitudes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/kernel_test_util.h"
#include "ops/vec.h"

namespace hearth {
namespace {

using cpu::Isa;

const int64_t kSizes[] = {1, 7, 8, 9, 31, 63, 64, 257, 1000};

using test::isas;

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  return test::uniform_floats(n, seed, lo, hi);
}

TEST(OpsVec, ElementwiseMatchScalarBits) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      const auto a = random_vec(n, 1), b = random_vec(n, 2);
      std::vector<float> y = a;
      vec_add(isa, y.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] + b[i]) << n;

      std::vector<float> out(static_cast<size_t>(n));
      vec_add_to(isa, out.data(), a.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << n;

      y = a;
      vec_mul(isa, y.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] * b[i]) << n;

      y = a;
      vec_scale(isa, y.data(), 0.37f, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] * 0.37f) << n;

      y = a;
      vec_axpy(isa, y.data(), -1.25f, b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], std::fma(-1.25f, b[i], a[i])) << n;
    }
  }
}

TEST(OpsVec, DotProductWithinFloatRounding) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      const auto a = random_vec(n, 3), b = random_vec(n, 4);
      double ref = 0.0, mag = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        ref += static_cast<double>(a[i]) * b[i];
        mag += std::fabs(static_cast<double>(a[i]) * b[i]);
      }
      const float got = vec_dot_f32(isa, a.data(), b.data(), n);
      // Float summation: error bounded by about n·eps·Σ|a·b|; random signs stay far below that.
      EXPECT_NEAR(got, ref, 1e-6 * mag * std::sqrt(static_cast<double>(n)) + 1e-7) << n;
    }
  }
}

TEST(OpsVec, MaxAndArgmax) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      auto x = random_vec(n, 5);
      const int64_t at = n / 2;
      x[at] = 9.0f;
      EXPECT_EQ(vec_max(isa, x.data(), n), 9.0f);
      EXPECT_EQ(argmax(x.data(), n), at);
    }
  }
  const std::vector<float> ties = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(argmax(ties.data(), 4), 1);  // first of equal maxima, like llama.cpp's greedy pick
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> with_nan = {nan, -5.0f, nan, -1.0f, -3.0f};
  EXPECT_EQ(argmax(with_nan.data(), 5), 3);
  const std::vector<float> all_nan = {nan, nan};
  EXPECT_EQ(argmax(all_nan.data(), 2), 0);
}

// Against a plain filter on odd sizes, with NaNs, values equal to the threshold (they pass) and
// the all-pass and none-pass extremes; nothing is written past n.
TEST(OpsVec, SelectAtLeastMatchesFilter) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      for (float threshold : {0.0f, -10.0f, 10.0f, 0.5f}) {
        auto x = random_vec(n, 9);
        if (n > 3) x[3] = nan;
        if (n > 5) x[5] = threshold;
        std::vector<int32_t> want;
        for (int64_t i = 0; i < n; ++i) {
          if (x[i] >= threshold) want.push_back(static_cast<int32_t>(i));
        }
        std::vector<int32_t> idx(static_cast<size_t>(n) + 8, -7);
        const int64_t k = select_at_least(isa, x.data(), n, threshold, idx.data());
        ASSERT_EQ(k, static_cast<int64_t>(want.size())) << cpu::isa_name(isa) << " n=" << n;
        for (int64_t j = 0; j < k; ++j) ASSERT_EQ(idx[j], want[j]) << n << " j=" << j;
        for (size_t j = static_cast<size_t>(n); j < idx.size(); ++j) ASSERT_EQ(idx[j], -7) << n;
      }
    }
  }
}

TEST(OpsVec, SoftmaxMatchesDoubleReference) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      auto x = random_vec(n, 6, -20.0f, 20.0f);
      if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // a masked logit
      std::vector<double> ref(static_cast<size_t>(n));
      double max = -INFINITY, sum = 0.0;
      for (float v : x) max = std::max(max, static_cast<double>(v));
      for (int64_t i = 0; i < n; ++i) sum += ref[i] = std::exp(x[i] - max);
      softmax(isa, x.data(), n);
      double total = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        // Float x - max is rounded (up to 2e-6 absolute for |x| <= 40 here, so as much relative
        // error after exp) before a few ulp of exp error.
        EXPECT_NEAR(x[i], ref[i] / sum, 4e-6 * (ref[i] / sum) + 1e-12) << n << " @" << i;
        total += x[i];
      }
      if (n > 3) {
        EXPECT_EQ(x[2], 0.0f);
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
}

TEST(OpsVec, SoftmaxScalarAndAvx2Agree) {
  HEARTH_REQUIRE_AVX2();
  auto a = random_vec(32000, 7, -30.0f, 30.0f);
  auto b = a;
  softmax(Isa::Scalar, a.data(), 32000);
  softmax(Isa::Avx2, b.data(), 32000);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6 * a[i] + 1e-30) << i;
}

}  // namespace
}  // namespace hearth
