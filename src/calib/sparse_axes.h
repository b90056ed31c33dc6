// Axes of the residual stream in which a magnitude threshold loses less (calib/residual_rotation.h
// folds them into the weights). The principal axes order the stream's energy by its mean over
// tokens; a threshold acts on each token alone, and what it drops is the energy of that token's
// smallest elements. So, starting from the principal axes, the rotation Q is refined to minimize
// that directly on sampled normed vectors h (rows of H):
//   min over orthogonal Q of || H Q - top_k(H Q) ||^2,
// where top_k keeps each row's k largest magnitudes (k = the kept share of n). This is the
// orthogonal sparsifying transform of dictionary learning, taken by alternating steps: with the
// kept elements S = top_k(H Q) fixed, the best Q is the polar factor of H^T S, and since Q^T H^T S
// is close to symmetric, its polar factor is close to I + K with K the antisymmetric solution of
// K_ij (B_ii + B_jj) = B_ij - B_ji (B = Q^T H^T S); a step moves Q by c K, re-orthonormalized by
// Newton-Schulz iterations, at O(N n^2) a step instead of an SVD. Steps larger than the first-order
// one (c > 1) converge faster; a step that loses energy is undone and c halved.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace hearth::calib {

struct SparseAxesReport {
  double lost_before = 0;  // share of the samples' energy the top-k drops in the starting axes
  double lost_after = 0;   // the same in the refined axes
  int64_t steps = 0;       // steps taken (undone ones included)
  std::vector<double> variance;  // [n] the samples' mean square along each refined axis
};

// Refines q ([n, n] row-major, column i = axis i, orthonormal) in place for samples h ([m, n]
// row-major) thresholded at `skipped` (the share of each row's elements dropped, in (0, 1)).
// Deterministic, and the same for any n_threads. The axes come back ordered by the samples'
// mean square along them, largest first (report.variance).
// progress (may be empty) hears each step taken and the share of the energy dropped after it.
SparseAxesReport refine_sparse_axes(
    std::vector<double>& q, int64_t n, const std::vector<float>& h, int64_t m, double skipped,
    int64_t steps, int n_threads,
    const std::function<void(int64_t step, double lost)>& progress = {});

// The share of the energy of h ([m, n]) that keeping each row's `keep` largest magnitudes in the
// axes q drops.
double top_k_loss(const std::vector<double>& q, int64_t n, const std::vector<float>& h, int64_t m,
                  int64_t keep, int n_threads);

}  // namespace hearth::calib
