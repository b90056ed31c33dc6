// Q4_0 rows chosen with error feedback under the statistics of the activations they multiply
// (GPTQ, Frantar et al., arXiv 2210.17323), for `hearth quantize --imatrix` when the imatrix has
// Gram matrices. The blocks are ordinary Q4_0 blocks; only which codes and scales are picked
// changes. Why: the output error of a row is (w - w_q)^T H (w - w_q) with H = E[x x^T], and on
// small models the activations are strongly correlated (a shared direction in the residual
// stream), so weighing each column by its own mean square alone (the diagonal of H, llama.cpp's
// imatrix) can even hurt; GPTQ lets later columns absorb the rounding error of earlier ones.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace hearth {

class GptqQ4_0 {
 public:
  // gram[cols * cols]: sum over the calibration rows of x x^T (symmetric), `count` rows. A small
  // damping (1% of the mean diagonal) keeps H invertible; columns never seen get unit weight.
  // Throws hearth::Error when cols is not a multiple of 32 or the statistics are unusable.
  GptqQ4_0(const float* gram, int64_t cols, double count);

  // y[cols / 32] = the row x[cols] in Q4_0, each block's scale chosen (quantize_block_q4_0_search)
  // from the row as updated by the earlier columns' errors; then the row's block scales refitted
  // together for the least (x - y)^T H (x - y) given the codes, kept when that is lower.
  void quantize_row(const float* x, BlockQ4_0* y) const;

  // (x - y)^T H (x - y) for the row x and its quantized version y (H damped, per calibration row).
  double row_error(const float* x, const BlockQ4_0* y) const;

  int64_t cols() const { return cols_; }

 private:
  int64_t cols_;
  std::vector<double> h_;  // [cols * cols] H = E[x x^T], damped
  std::vector<double> u_;  // [cols * cols] upper Cholesky factor of H^-1 (row-major)

  void refit_scales(const std::vector<double>& x, BlockQ4_0* y) const;
};

}  // namespace hearth
