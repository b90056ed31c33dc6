// ops/activation.h: the AVX2 exponential's accuracy over its whole range, every activation and GLU
// form against double references (and AVX2 against scalar), the threaded glu.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/kernel_test_util.h"
#include "backend/cpu/context.h"
#include "ops/activation.h"

namespace hearth {
namespace {

using cpu::Isa;

const int64_t kSizes[] = {1, 7, 8, 9, 63, 257, 11008};

using test::isas;

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo = -12.0f, float hi = 12.0f) {
  return test::uniform_floats(n, seed, lo, hi);
}

double silu_d(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_d(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
}

TEST(OpsActivation, ExpRelativeErrorBelow3e7) {
  // Dense sweep of the normal range, both ends included.
  std::vector<float> x;
  for (float v = -87.3f; v < 88.7f; v += 0.00731f) x.push_back(v);
  x.push_back(-87.33654f);
  x.push_back(88.72283f);
  x.push_back(0.0f);
  for (Isa isa : isas()) {
    std::vector<float> y(x.size());
    vec_exp(isa, x.data(), static_cast<int64_t>(x.size()), y.data());
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      if (ref > std::numeric_limits<float>::max()) continue;
      worst = std::max(worst, std::fabs(y[i] - ref) / ref);
    }
    EXPECT_LT(worst, 3e-7) << cpu::isa_name(isa);
  }
}

TEST(OpsActivation, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {
      -inf, -1000.0f, -88.0f, 89.0f, 1000.0f, inf, std::numeric_limits<float>::quiet_NaN(),
      0.0f, -0.0f};
  for (Isa isa : isas()) {
    std::vector<float> y(x.size());
    vec_exp(isa, x.data(), static_cast<int64_t>(x.size()), y.data());
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_LT(y[2], 1e-37f);
    EXPECT_EQ(y[3], inf);
    EXPECT_EQ(y[4], inf);
    EXPECT_EQ(y[5], inf);
    EXPECT_TRUE(std::isnan(y[6]));
    EXPECT_EQ(y[7], 1.0f);
    EXPECT_EQ(y[8], 1.0f);
  }
}

TEST(OpsActivation, SiluAndSwigluMatchDouble) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      auto g = random_vec(n, 1);
      g[0] = -100.0f;  // e^100 overflows to inf: silu must give -0, not NaN
      const auto u = random_vec(n, 2, -2.0f, 2.0f);
      std::vector<float> y(g.size()), z(g.size());
      silu(isa, g.data(), n, y.data());
      swiglu(isa, g.data(), u.data(), n, z.data());
      for (int64_t i = 0; i < n; ++i) {
        const double ref = silu_d(g[i]);
        // exp within 3e-7, the division and 1 + e rounding: well under 1e-6 relative.
        ASSERT_NEAR(y[i], ref, 1e-6 * std::fabs(ref) + 1e-37) << n << " x=" << g[i];
        ASSERT_NEAR(z[i], ref * u[i], 1e-6 * std::fabs(ref * u[i]) + 1e-37) << n;
      }
    }
  }
}

TEST(OpsActivation, SiluAvx2MatchesScalarClosely) {
  HEARTH_REQUIRE_AVX2();
  const auto x = random_vec(100000, 3, -30.0f, 30.0f);
  std::vector<float> a(x.size()), b(x.size());
  silu(Isa::Scalar, x.data(), 100000, a.data());
  silu(Isa::Avx2, x.data(), 100000, b.data());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (a[i] != 0.0f)
      worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / std::fabs(a[i]));
  }
  EXPECT_LT(worst, 5e-7);
}

TEST(OpsActivation, GeluMatchesDouble) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      const auto g = random_vec(n, 4, -8.0f, 8.0f);
      const auto u = random_vec(n, 5, -2.0f, 2.0f);
      std::vector<float> y(g.size()), z(g.size());
      gelu(isa, g.data(), n, y.data());
      glu(isa, Activation::Gelu, g.data(), u.data(), n, z.data());
      for (int64_t i = 0; i < n; ++i) {
        const double ref = gelu_d(g[i]);
        // The tanh form cancels in 1 + tanh for x << 0: bound the error by |x| · 1e-6.
        const double tol = 1e-6 * (std::fabs(ref) + std::fabs(g[i]) * 0.5);
        ASSERT_NEAR(y[i], ref, tol) << n << " x=" << g[i];
        ASSERT_NEAR(z[i], ref * u[i], tol * 2.0) << n;
      }
    }
  }
}

TEST(OpsActivation, ReluFamilyExact) {
  for (Isa isa : isas()) {
    for (int64_t n : kSizes) {
      const auto g = random_vec(n, 6), u = random_vec(n, 7);
      std::vector<float> y(g.size()), z(g.size()), y2(g.size()), z2(g.size());
      relu(isa, g.data(), n, y.data());
      reglu(isa, g.data(), u.data(), n, z.data());
      activate(isa, Activation::Relu2, g.data(), n, y2.data());
      glu(isa, Activation::Relu2, g.data(), u.data(), n, z2.data());
      for (int64_t i = 0; i < n; ++i) {
        const float r = g[i] > 0.0f ? g[i] : 0.0f;
        ASSERT_EQ(y[i], r);
        ASSERT_EQ(z[i], r * u[i]);
        ASSERT_EQ(y2[i], r * r);
        ASSERT_EQ(z2[i], (r * r) * u[i]);
      }
    }
  }
}

TEST(OpsActivation, InPlace) {
  for (Isa isa : isas()) {
    const auto g = random_vec(37, 8), u = random_vec(37, 9);
    std::vector<float> expect(37), inplace = g;
    swiglu(isa, g.data(), u.data(), 37, expect.data());
    swiglu(isa, inplace.data(), u.data(), 37, inplace.data());
    EXPECT_EQ(inplace, expect);
  }
}

TEST(OpsActivation, ThreadedGluMatchesSingleThread) {
  const int64_t n = 512 * 172 + 5;  // a prefill batch of a small model, odd total
  const auto g = random_vec(n, 10), u = random_vec(n, 11);
  for (Isa isa : isas()) {
    for (Activation act : {Activation::Silu, Activation::Relu, Activation::Gelu}) {
      std::vector<float> ref(g.size());
      glu(isa, act, g.data(), u.data(), n, ref.data());
      for (int threads : {1, 2, 3, 4}) {
        cpu::CpuContext ctx(threads, isa);
        std::vector<float> y(g.size());
        glu(ctx, act, g.data(), u.data(), n, y.data());
        ASSERT_EQ(y, ref) << activation_name(act) << " threads " << threads;
      }
    }
  }
}

TEST(OpsActivation, Names) {
  for (Activation act : {Activation::Silu, Activation::Relu, Activation::Relu2, Activation::Gelu}) {
    EXPECT_EQ(parse_activation(activation_name(act)), act);
  }
  EXPECT_FALSE(parse_activation("swish").has_value());
}

}  // namespace
}  // namespace hearth
