#include "calib/symmetric_eigen.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

namespace hearth::calib {
namespace {

std::vector<double> random_symmetric(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) a[i * n + j] = a[j * n + i] = g(rng);
  }
  return a;
}

// A = V diag(w) V^T, V^T V = I, w descending.
void expect_decomposes(const std::vector<double>& a, int64_t n, double tol) {
  const SymmetricEigen e = symmetric_eigen(a, n);
  ASSERT_EQ(static_cast<int64_t>(e.values.size()), n);
  for (int64_t i = 1; i < n; ++i) EXPECT_GE(e.values[i - 1], e.values[i]);
  double scale = 0;
  for (double x : a) scale = std::max(scale, std::abs(x));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double av = 0, vv = 0;
      for (int64_t k = 0; k < n; ++k) {
        av += e.vectors[r * n + k] * e.values[k] * e.vectors[c * n + k];
        vv += e.vectors[k * n + r] * e.vectors[k * n + c];
      }
      ASSERT_NEAR(av, a[r * n + c], tol * std::max(scale, 1.0)) << r << ", " << c;
      ASSERT_NEAR(vv, r == c ? 1.0 : 0.0, tol) << r << ", " << c;
    }
  }
}

TEST(SymmetricEigen, DecomposesRandomMatricesOfOddSizes) {
  for (int64_t n : {1, 2, 3, 7, 33, 100}) expect_decomposes(random_symmetric(n, 7 + n), n, 1e-10);
}

TEST(SymmetricEigen, KnownSpectrumAndRepeatedAndZeroEigenvalues) {
  // diag(3, 1, 1, 0, -2) rotated by a fixed orthogonal matrix (Householder I - 2 u u^T).
  const int64_t n = 5;
  const double w[n] = {3, 1, 1, 0, -2};
  const double u0[n] = {1, 2, -1, 0.5, 3};
  double norm = 0;
  for (double x : u0) norm += x * x;
  std::vector<double> q(n * n), a(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) q[i * n + j] = (i == j) - 2 * u0[i] * u0[j] / norm;
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < n; ++k) a[i * n + j] += q[i * n + k] * w[k] * q[j * n + k];
    }
  }
  const SymmetricEigen e = symmetric_eigen(a, n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(e.values[i], w[i], 1e-12);
  expect_decomposes(a, n, 1e-12);
  // A matrix that is already diagonal, and the zero matrix.
  std::vector<double> diag(16, 0.0);
  diag[0] = 2;
  diag[5] = -1;
  diag[15] = 5;
  expect_decomposes(diag, 4, 1e-14);
  expect_decomposes(std::vector<double>(9, 0.0), 3, 1e-14);
}

TEST(SymmetricEigen, RefusesNonFiniteInput) {
  std::vector<double> a = random_symmetric(4, 1);
  a[5] = std::nan("");
  EXPECT_THROW(symmetric_eigen(a, 4), std::exception);
}

}  // namespace
}  // namespace hearth::calib
