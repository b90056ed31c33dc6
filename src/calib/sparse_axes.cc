#include "calib/sparse_axes.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/context.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/matmul.h"
#include "sparse/predictor_train_internal.h"

namespace hearth::calib {
namespace {

using Floats = std::vector<float>;

// t = a[rows, cols] transposed, [cols, rows]
void transpose(const Floats& a, int64_t rows, int64_t cols, Floats& t) {
  t.resize(a.size());
  sparse::train::transpose(a.data(), rows, cols, t.data());
}

// The samples in the axes of qt (rows = axes) and their top-k: z = H Q, s = top_k(z).
struct Projection {
  Floats z, s;  // [m, n]
  double lost = 0, total = 0;
  double loss() const { return total > 0 ? lost / total : 0.0; }
};

class Refiner {
 public:
  Refiner(int64_t n, const Floats& h, int64_t m, int64_t keep, int n_threads)
      : n_(n), m_(m), keep_(keep), h_(h), ctx_(n_threads) {}

  // y[rows_x, rows_w] = x[rows_x, cols] · w[rows_w, cols]^T
  void product(const Floats& w, int64_t rows_w, int64_t cols, const Floats& x, int64_t rows_x,
               Floats& y) {
    y.resize(static_cast<size_t>(rows_x * rows_w));
    matmul(ctx_, DType::F32, w.data(), rows_w, cols, x.data(), rows_x, y.data());
  }

  // p = the samples in qt's axes; p's buffers are reused from step to step.
  void project(const Floats& qt, Projection& p) {
    product(qt, n_, n_, h_, m_, p.z);
    p.s = p.z;
    std::vector<double>& lost = lost_;
    std::vector<double>& total = total_;
    lost.assign(static_cast<size_t>(m_), 0.0);
    total.assign(static_cast<size_t>(m_), 0.0);
    ctx_.pool().run([&](int ith, int nth) {
      std::vector<float> mag(static_cast<size_t>(n_));
      for (int64_t t = ith; t < m_; t += nth) {
        float* row = p.s.data() + t * n_;
        double all = 0;
        for (int64_t i = 0; i < n_; ++i) {
          mag[static_cast<size_t>(i)] = std::abs(row[i]);
          all += static_cast<double>(row[i]) * row[i];
        }
        total[static_cast<size_t>(t)] = all;
        if (keep_ >= n_) continue;
        // The keep-th largest magnitude; elements below it go, and ties at it go last-first.
        std::nth_element(mag.begin(), mag.begin() + (n_ - keep_), mag.end());
        const float edge = mag[static_cast<size_t>(n_ - keep_)];
        int64_t below = 0;
        for (int64_t i = 0; i < n_; ++i) below += std::abs(row[i]) < edge;
        int64_t ties = n_ - keep_ - below;  // elements equal to the edge that must go too
        double dropped = 0;
        for (int64_t i = 0; i < n_; ++i) {
          const float a = std::abs(row[i]);
          if (a < edge || (a == edge && ties-- > 0)) {
            dropped += static_cast<double>(row[i]) * row[i];
            row[i] = 0.0f;
          }
        }
        lost[static_cast<size_t>(t)] = dropped;
      }
    });
    p.lost = std::accumulate(lost.begin(), lost.end(), 0.0);
    p.total = std::accumulate(total.begin(), total.end(), 0.0);
  }

  // K with K_ij (B_ii + B_jj) = B_ij - B_ji, B = Z^T S [n, n].
  Floats step_direction(const Projection& p) {
    Floats b;
    transpose(p.s, m_, n_, st_);
    transpose(p.z, m_, n_, zt_);
    product(st_, n_, m_, zt_, n_, b);  // b[i][j] = B_ij
    Floats k(static_cast<size_t>(n_ * n_), 0.0f);
    for (int64_t i = 0; i < n_; ++i) {
      for (int64_t j = 0; j < n_; ++j) {
        const double den = static_cast<double>(b[static_cast<size_t>(i * n_ + i)]) +
                           b[static_cast<size_t>(j * n_ + j)];
        if (den > 0) {
          k[static_cast<size_t>(i * n_ + j)] =
              static_cast<float>((static_cast<double>(b[static_cast<size_t>(i * n_ + j)]) -
                                  b[static_cast<size_t>(j * n_ + i)]) /
                                 den);
        }
      }
    }
    return k;
  }

  // The axes moved by c K: Q (I + c K), whose transpose is (I - c K) Q^T, made orthonormal again.
  Floats moved(const Floats& qt, const Floats& k, double c) {
    Floats kq, q;
    transpose(qt, n_, n_, q);
    product(q, n_, n_, k, n_, kq);  // kq = K · Q^T
    Floats x(qt.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = qt[i] - static_cast<float>(c) * kq[i];
    orthonormalize(x);
    return x;
  }

  // Newton-Schulz: X <- 1.5 X - 0.5 (X X^T) X, until the rows are orthonormal to float precision.
  // Converges where X's singular values lie in (0, sqrt 3); the steps keep them below 1.2.
  void orthonormalize(Floats& x) {
    Floats g, gx, xt;
    for (int it = 0; it < 8; ++it) {
      product(x, n_, n_, x, n_, g);  // g = X X^T
      double worst = 0;
      for (int64_t i = 0; i < n_; ++i) {
        for (int64_t j = 0; j < n_; ++j) {
          worst = std::max(
              worst, std::abs(static_cast<double>(g[static_cast<size_t>(i * n_ + j)]) - (i == j)));
        }
      }
      if (worst < 1e-6) return;
      transpose(x, n_, n_, xt);
      product(xt, n_, n_, g, n_, gx);  // gx = G X
      for (size_t i = 0; i < x.size(); ++i) x[i] = 1.5f * x[i] - 0.5f * gx[i];
    }
  }

 private:
  int64_t n_, m_, keep_;
  const Floats& h_;
  cpu::CpuContext ctx_;
  Floats st_, zt_;                    // [n, m] scratch
  std::vector<double> lost_, total_;  // [m] per sample
};

// Frobenius norm of k.
double norm_of(const Floats& k) {
  double s = 0;
  for (float v : k) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

Floats axes_as_rows(const std::vector<double>& q, int64_t n) {
  Floats qt(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      qt[static_cast<size_t>(i * n + k)] = static_cast<float>(q[static_cast<size_t>(k * n + i)]);
    }
  }
  return qt;
}

int64_t kept_of(int64_t n, double skipped) {
  return std::clamp<int64_t>(std::llround((1.0 - skipped) * static_cast<double>(n)), 1, n);
}

void check_shapes(const std::vector<double>& q, int64_t n, const Floats& h, int64_t m) {
  if (n <= 0 || q.size() != static_cast<size_t>(n * n) || m <= 0 ||
      h.size() != static_cast<size_t>(m * n)) {
    fail("sparse axes: expected [", n, ", ", n, "] axes and [", m, ", ", n, "] samples");
  }
}

}  // namespace

double top_k_loss(const std::vector<double>& q, int64_t n, const std::vector<float>& h, int64_t m,
                  int64_t keep, int n_threads) {
  check_shapes(q, n, h, m);
  Refiner r(n, h, m, std::clamp<int64_t>(keep, 1, n), n_threads);
  Projection p;
  r.project(axes_as_rows(q, n), p);
  return p.loss();
}

SparseAxesReport refine_sparse_axes(std::vector<double>& q, int64_t n, const std::vector<float>& h,
                                    int64_t m, double skipped, int64_t steps, int n_threads,
                                    const std::function<void(int64_t, double)>& progress) {
  check_shapes(q, n, h, m);
  if (!(skipped > 0 && skipped < 1)) fail("sparse axes: the share skipped must lie in (0, 1)");
  Refiner r(n, h, m, kept_of(n, skipped), n_threads);
  Floats qt = axes_as_rows(q, n);
  Projection p, pc;
  r.project(qt, p);
  SparseAxesReport rep;
  rep.lost_before = p.loss();
  // Four first-order steps at once converged fastest on stories260K's stream; a step that loses
  // is undone and halved, down to a sixteenth.
  double c = 4.0;
  Floats k = r.step_direction(p);
  for (; rep.steps < steps && c >= 1.0 / 16; ++rep.steps) {
    const double size = norm_of(k);
    if (size == 0) break;
    // Singular values of I - c K stay below sqrt(1.25), where Newton-Schulz converges fast.
    Floats cand = r.moved(qt, k, std::min(c, 0.5 / size));
    r.project(cand, pc);
    if (pc.lost < p.lost) {
      qt = std::move(cand);
      std::swap(p, pc);
      k = r.step_direction(p);
    } else {
      c /= 2;
    }
    if (progress) progress(rep.steps + 1, p.loss());
  }
  rep.lost_after = p.loss();
  // Axes ordered by their mean square, largest first (a permutation keeps Q orthogonal).
  std::vector<double> energy(static_cast<size_t>(n), 0.0);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      const double v = p.z[static_cast<size_t>(t * n + i)];
      energy[static_cast<size_t>(i)] += v * v;
    }
  }
  for (double& e : energy) e /= static_cast<double>(m);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return energy[static_cast<size_t>(a)] > energy[static_cast<size_t>(b)];
  });
  rep.variance.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = order[static_cast<size_t>(i)];
    rep.variance[static_cast<size_t>(i)] = energy[static_cast<size_t>(src)];
    for (int64_t e = 0; e < n; ++e) {
      q[static_cast<size_t>(e * n + i)] = qt[static_cast<size_t>(src * n + e)];
    }
  }
  return rep;
}

}  // namespace hearth::calib
