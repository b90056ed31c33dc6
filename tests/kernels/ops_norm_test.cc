// ops/norm.h: rms_norm and layer_norm against ggml's step-by-step arithmetic (bit-exact for the
// scalar path), a double-precision reference, and across ISAs and thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/kernel_test_util.h"
#include "backend/cpu/context.h"
#include "ops/norm.h"

namespace hearth {
namespace {

using cpu::Isa;

const int64_t kSizes[] = {1, 7, 8, 63, 257, 4096};

using test::isas;

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  return test::uniform_floats(n, seed, lo, hi);
}

// ggml_compute_forward_rms_norm_f32 followed by ggml_mul, written out sequentially.
std::vector<float> rms_norm_ggml(const std::vector<float>& x, const std::vector<float>& w,
                                 float eps) {
  const int64_t n = static_cast<int64_t>(x.size());
  double sum = 0.0;
  for (float v : x) sum += static_cast<double>(v * v);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  std::vector<float> y(x.size());
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  return y;
}

TEST(OpsNorm, RmsNormScalarIsGgmlBitExact) {
  for (int64_t n : kSizes) {
    const auto x = random_vec(n, 1), w = random_vec(n, 2, 0.5f, 1.5f);
    std::vector<float> y(x.size());
    rms_norm(Isa::Scalar, x.data(), w.data(), 1e-5f, n, y.data());
    const auto ref = rms_norm_ggml(x, w, 1e-5f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], ref[i]) << n << " @" << i;
  }
}

TEST(OpsNorm, RmsNormMatchesDoubleReference) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      const auto x = random_vec(n, 3), w = random_vec(n, 4, 0.5f, 1.5f);
      std::vector<float> y(x.size());
      rms_norm(isa, x.data(), w.data(), 1e-6f, n, y.data());
      double ss = 0.0;
      for (float v : x) ss += static_cast<double>(v) * v;
      const double scale = 1.0 / std::sqrt(ss / n + 1e-6);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = x[i] * scale * w[i];
        EXPECT_NEAR(y[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << n << " @" << i;
      }
      // Without a weight, and in place.
      std::vector<float> z = x;
      rms_norm(isa, z.data(), nullptr, 1e-6f, n, z.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(z[i], x[i] * scale, 1e-6 * std::fabs(x[i] * scale));
    }
  }
}

TEST(OpsNorm, RmsNormAvx2MatchesScalar) {
  HEARTH_REQUIRE_AVX2();
  for (int64_t n : kSizes) {
    const auto x = random_vec(n, 5), w = random_vec(n, 6);
    std::vector<float> a(x.size()), b(x.size());
    rms_norm(Isa::Scalar, x.data(), w.data(), 1e-5f, n, a.data());
    rms_norm(Isa::Avx2, x.data(), w.data(), 1e-5f, n, b.data());
    // Only the double summation order differs: the float mean almost never changes.
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 2.4e-7 * std::fabs(a[i])) << n;
  }
}

TEST(OpsNorm, LayerNormMatchesDoubleReference) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      const auto x = random_vec(n, 7, -1.0f, 5.0f), w = random_vec(n, 8), b = random_vec(n, 9);
      std::vector<float> y(x.size());
      layer_norm(isa, x.data(), w.data(), b.data(), 1e-5f, n, y.data());
      double mean = 0.0, var = 0.0;
      for (float v : x) mean += v;
      mean /= n;
      for (float v : x) var += (v - mean) * (v - mean);
      var /= n;
      const double scale = 1.0 / std::sqrt(var + 1e-5);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = (x[i] - mean) * scale * w[i] + b[i];
        // x - mean is rounded to float: absolute error relative to the row's scale.
        EXPECT_NEAR(y[i], ref, 2e-6 * (std::fabs(w[i]) * 4.0 * scale + std::fabs(ref)))
            << n << " @" << i;
      }
      std::vector<float> z = x;
      layer_norm(isa, z.data(), nullptr, nullptr, 1e-5f, n, z.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(z[i], (x[i] - mean) * scale, 2e-6 * (4.0 * scale + 1.0));
    }
  }
}

TEST(OpsNorm, RowsVariantsMatchSingleRowForAnyThreadCount) {
  const int64_t n_rows = 37, n = 1031;  // enough elements to take the threaded path
  const auto x = random_vec(n_rows * n, 10), w = random_vec(n, 11), b = random_vec(n, 12);
  for (Isa isa : isas()) {
    std::vector<float> rms_ref(x.size()), ln_ref(x.size());
    for (int64_t r = 0; r < n_rows; ++r) {
      rms_norm(isa, x.data() + r * n, w.data(), 1e-5f, n, rms_ref.data() + r * n);
      layer_norm(isa, x.data() + r * n, w.data(), b.data(), 1e-5f, n, ln_ref.data() + r * n);
    }
    for (int threads : {1, 2, 3, 5}) {
      cpu::CpuContext ctx(threads, isa);
      std::vector<float> y(x.size());
      rms_norm_rows(ctx, x.data(), w.data(), 1e-5f, n_rows, n, y.data());
      ASSERT_EQ(y, rms_ref) << threads;
      layer_norm_rows(ctx, x.data(), w.data(), b.data(), 1e-5f, n_rows, n, y.data());
      ASSERT_EQ(y, ln_ref) << threads;
    }
  }
}

}  // namespace
}  // namespace hearth
