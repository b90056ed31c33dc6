// Sparse axes (calib/sparse_axes.h): on vectors that are sparse in some hidden orthonormal basis,
// the refinement from the principal axes finds axes in which a token's smallest elements hold far
// less of its energy; the axes stay orthonormal and ordered; the result is the same bits for any
// thread count; bad shapes and shares are refused.
#include "calib/sparse_axes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "calib/symmetric_eigen.h"

namespace hearth::calib {
namespace {

constexpr int64_t kN = 23;  // odd, so no vector width divides it

// A random orthonormal [n, n] basis (Gram-Schmidt of Gaussian columns), column-major in q[k*n+i].
std::vector<double> random_basis(int64_t n, std::mt19937& rng) {
  std::normal_distribution<double> g;
  std::vector<double> q(static_cast<size_t>(n * n));
  for (double& v : q) v = g(rng);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < n; ++k) dot += q[k * n + i] * q[k * n + j];
      for (int64_t k = 0; k < n; ++k) q[k * n + i] -= dot * q[k * n + j];
    }
    double norm = 0;
    for (int64_t k = 0; k < n; ++k) norm += q[k * n + i] * q[k * n + i];
    for (int64_t k = 0; k < n; ++k) q[k * n + i] /= std::sqrt(norm);
  }
  return q;
}

// m vectors, each with `active` Laplacian-ish coefficients on the hidden basis' axes (axis i
// scaled by 1 + i / n, so the principal axes are not degenerate) plus a little noise.
std::vector<float> sparse_samples(int64_t m, int64_t active, const std::vector<double>& basis,
                                  std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> axis(0, kN - 1);
  std::exponential_distribution<double> size(1.0);
  std::bernoulli_distribution sign;
  std::normal_distribution<double> noise(0.0, 0.01);
  std::vector<float> h(static_cast<size_t>(m * kN));
  std::vector<double> c(kN);
  for (int64_t t = 0; t < m; ++t) {
    std::fill(c.begin(), c.end(), 0.0);
    for (int64_t a = 0; a < active; ++a) {
      const int64_t i = axis(rng);
      c[i] = (sign(rng) ? 1.0 : -1.0) * (0.2 + size(rng)) * (1.0 + static_cast<double>(i) / kN);
    }
    for (int64_t k = 0; k < kN; ++k) {
      double v = noise(rng);
      for (int64_t i = 0; i < kN; ++i) v += basis[k * kN + i] * c[i];
      h[t * kN + k] = static_cast<float>(v);
    }
  }
  return h;
}

std::vector<double> principal(const std::vector<float>& h, int64_t m) {
  std::vector<double> moment(kN * kN, 0.0);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t i = 0; i < kN; ++i) {
      for (int64_t j = 0; j < kN; ++j) moment[i * kN + j] += double{h[t * kN + i]} * h[t * kN + j];
    }
  }
  return symmetric_eigen(moment, kN).vectors;
}

struct Data {
  int64_t m = 3001;
  std::vector<float> h;
  std::vector<double> start;
};

Data make_data(uint32_t seed) {
  std::mt19937 rng(seed);
  Data d;
  d.h = sparse_samples(d.m, 5, random_basis(kN, rng), rng);
  d.start = principal(d.h, d.m);
  return d;
}

TEST(SparseAxes, FindsTheBasisTheVectorsAreSparseIn) {
  const Data d = make_data(3);
  std::vector<double> q = d.start;
  const SparseAxesReport rep = refine_sparse_axes(q, kN, d.h, d.m, 0.6, 200, 2);
  EXPECT_GT(rep.steps, 0);
  EXPECT_NEAR(rep.lost_before, top_k_loss(d.start, kN, d.h, d.m, 9, 2), 1e-9);
  EXPECT_NEAR(rep.lost_after, top_k_loss(q, kN, d.h, d.m, 9, 2), 1e-6);
  // In the principal axes the dropped 14 of 23 elements hold a few percent of the energy; in the
  // hidden basis only the rare vectors with more than 9 active axes, and the noise, lose any.
  EXPECT_GT(rep.lost_before, 0.02);
  EXPECT_LT(rep.lost_after, 0.05 * rep.lost_before);
  // Orthonormal columns, ordered by mean square.
  for (int64_t i = 0; i < kN; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < kN; ++k) dot += q[k * kN + i] * q[k * kN + j];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5) << i << ", " << j;
    }
  }
  ASSERT_EQ(rep.variance.size(), static_cast<size_t>(kN));
  for (int64_t i = 1; i < kN; ++i) EXPECT_GE(rep.variance[i - 1], rep.variance[i]);
}

TEST(SparseAxes, SameBitsForAnyThreadCountAndNeverWorse) {
  const Data d = make_data(11);
  std::vector<double> one = d.start, three = d.start;
  const SparseAxesReport a = refine_sparse_axes(one, kN, d.h, d.m, 0.3, 40, 1);
  const SparseAxesReport b = refine_sparse_axes(three, kN, d.h, d.m, 0.3, 40, 3);
  EXPECT_EQ(one, three);
  EXPECT_EQ(a.lost_after, b.lost_after);
  EXPECT_LE(a.lost_after, a.lost_before);
}

TEST(SparseAxes, RefusesBadSharesAndShapes) {
  const Data d = make_data(5);
  std::vector<double> q = d.start;
  EXPECT_THROW(refine_sparse_axes(q, kN, d.h, d.m, 0.0, 10, 1), std::exception);
  EXPECT_THROW(refine_sparse_axes(q, kN, d.h, d.m, 1.0, 10, 1), std::exception);
  EXPECT_THROW(refine_sparse_axes(q, kN, d.h, d.m + 1, 0.5, 10, 1), std::exception);
  std::vector<double> small(static_cast<size_t>(kN * kN - 1));
  EXPECT_THROW(refine_sparse_axes(small, kN, d.h, d.m, 0.5, 10, 1), std::exception);
}

}  // namespace
}  // namespace hearth::calib
