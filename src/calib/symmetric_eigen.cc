#include "calib/symmetric_eigen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace hearth::calib {
namespace {

// Householder reduction of the symmetric matrix v[n, n] (its lower triangle is read) to
// tridiagonal form: d[n] its diagonal, e[n] its sub-diagonal (e[i] couples i - 1 and i; e[0] =
// 0), and v becomes the orthogonal matrix V of the reduction (V^T A V is the tridiagonal matrix).
// v is held column by column (at(r, c) = v[c * n + r]), so that every O(n^3) loop below walks a
// column contiguously; for the symmetric input that is the same matrix, and on return the rows
// of v as stored are V's columns.
void tridiagonalize(std::vector<double>& v, int64_t n, std::vector<double>& d,
                    std::vector<double>& e) {
  auto at = [&](int64_t r, int64_t c) -> double& { return v[static_cast<size_t>(c * n + r)]; };
  for (int64_t j = 0; j < n; ++j) d[j] = at(n - 1, j);
  for (int64_t i = n - 1; i > 0; --i) {
    double scale = 0, h = 0;
    for (int64_t k = 0; k < i; ++k) scale += std::abs(d[k]);
    if (scale == 0) {
      // Row i is already reduced: nothing to reflect.
      e[i] = d[i - 1];
      for (int64_t j = 0; j < i; ++j) {
        d[j] = at(i - 1, j);
        at(i, j) = 0;
        at(j, i) = 0;
      }
    } else {
      for (int64_t k = 0; k < i; ++k) {
        d[k] /= scale;
        h += d[k] * d[k];
      }
      double f = d[i - 1];
      const double g0 = f > 0 ? -std::sqrt(h) : std::sqrt(h);
      e[i] = scale * g0;
      h -= f * g0;
      d[i - 1] = f - g0;
      for (int64_t j = 0; j < i; ++j) e[j] = 0;
      // e = a u (the lower triangle's product with the Householder vector u = d[0, i)).
      for (int64_t j = 0; j < i; ++j) {
        f = d[j];
        at(j, i) = f;
        double g = e[j] + at(j, j) * f;
        for (int64_t k = j + 1; k < i; ++k) {
          g += at(k, j) * d[k];
          e[k] += at(k, j) * f;
        }
        e[j] = g;
      }
      f = 0;
      for (int64_t j = 0; j < i; ++j) {
        e[j] /= h;
        f += e[j] * d[j];
      }
      const double hh = f / (h + h);
      for (int64_t j = 0; j < i; ++j) e[j] -= hh * d[j];
      // a -= u e^T + e u^T on the lower triangle.
      for (int64_t j = 0; j < i; ++j) {
        f = d[j];
        const double g = e[j];
        for (int64_t k = j; k < i; ++k) at(k, j) -= f * e[k] + g * d[k];
        d[j] = at(i - 1, j);
        at(i, j) = 0;
      }
    }
    d[i] = h;
  }
  // Accumulate the reflections into v.
  for (int64_t i = 0; i < n - 1; ++i) {
    at(n - 1, i) = at(i, i);
    at(i, i) = 1;
    const double h = d[i + 1];
    if (h != 0) {
      for (int64_t k = 0; k <= i; ++k) d[k] = at(k, i + 1) / h;
      for (int64_t j = 0; j <= i; ++j) {
        double g = 0;
        for (int64_t k = 0; k <= i; ++k) g += at(k, i + 1) * at(k, j);
        for (int64_t k = 0; k <= i; ++k) at(k, j) -= g * d[k];
      }
    }
    for (int64_t k = 0; k <= i; ++k) at(k, i + 1) = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    d[j] = at(n - 1, j);
    at(n - 1, j) = 0;
  }
  at(n - 1, n - 1) = 1;
  e[0] = 0;
}

// Implicit QL with Wilkinson shifts on the tridiagonal (d, e), applying each plane rotation to
// the rows of w (the transposed eigenvector matrix, so a rotation touches two contiguous rows).
void tridiagonal_ql(std::vector<double>& w, int64_t n, std::vector<double>& d,
                    std::vector<double>& e) {
  for (int64_t i = 1; i < n; ++i) e[i - 1] = e[i];
  e[n - 1] = 0;
  double shift = 0, tst = 0;
  const double eps = std::ldexp(1.0, -52);
  for (int64_t l = 0; l < n; ++l) {
    tst = std::max(tst, std::abs(d[l]) + std::abs(e[l]));
    int64_t m = l;
    while (m < n && std::abs(e[m]) > eps * tst) ++m;
    if (m == n) m = n - 1;  // e[n - 1] is 0, so only reached through rounding
    if (m > l) {
      int iterations = 0;
      do {
        if (++iterations > 64) fail("eigen-decomposition did not converge (non-finite values?)");
        double g = d[l];
        double p = (d[l + 1] - g) / (2 * e[l]);
        double r = std::hypot(p, 1.0);
        if (p < 0) r = -r;
        d[l] = e[l] / (p + r);
        d[l + 1] = e[l] * (p + r);
        const double dl1 = d[l + 1];
        double h = g - d[l];
        for (int64_t i = l + 2; i < n; ++i) d[i] -= h;
        shift += h;
        p = d[m];
        double c = 1, c2 = 1, c3 = 1, s = 0, s2 = 0;
        const double el1 = e[l + 1];
        for (int64_t i = m - 1; i >= l; --i) {
          c3 = c2;
          c2 = c;
          s2 = s;
          g = c * e[i];
          h = c * p;
          r = std::hypot(p, e[i]);
          e[i + 1] = s * r;
          s = e[i] / r;
          c = p / r;
          p = c * d[i] - s * g;
          d[i + 1] = h + s * (c * g + s * d[i]);
          double* wi = &w[static_cast<size_t>(i * n)];
          double* wj = wi + n;
          for (int64_t k = 0; k < n; ++k) {
            const double t = wj[k];
            wj[k] = s * wi[k] + c * t;
            wi[k] = c * wi[k] - s * t;
          }
        }
        p = -s * s2 * c3 * el1 * e[l] / dl1;
        e[l] = s * p;
        d[l] = c * p;
      } while (std::abs(e[l]) > eps * tst);
    }
    d[l] += shift;
    e[l] = 0;
  }
}

}  // namespace

SymmetricEigen symmetric_eigen(std::vector<double> a, int64_t n) {
  if (n <= 0 || static_cast<int64_t>(a.size()) != n * n) fail("symmetric_eigen: not n x n");
  for (double x : a) {
    if (!std::isfinite(x)) fail("eigen-decomposition of a matrix with non-finite values");
  }
  std::vector<double> d(static_cast<size_t>(n)), e(static_cast<size_t>(n));
  tridiagonalize(a, n, d, e);
  std::vector<double>& w = a;  // V^T row-major: the eigenvectors as rows while the rotations run
  tridiagonal_ql(w, n, d, e);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return d[x] > d[y]; });
  SymmetricEigen out;
  out.values.resize(static_cast<size_t>(n));
  out.vectors.resize(a.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = order[static_cast<size_t>(i)];
    out.values[static_cast<size_t>(i)] = d[static_cast<size_t>(src)];
    for (int64_t k = 0; k < n; ++k) {
      out.vectors[static_cast<size_t>(k * n + i)] = w[static_cast<size_t>(src * n + k)];
    }
  }
  return out;
}

}  // namespace hearth::calib
