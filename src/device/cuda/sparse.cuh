// The neuron-sparse steps of the hot FFN on the device: compacting the active neurons into an
// index list, and the down projection as an axpy over the active rows of the neuron-major
// down_t. Both are deterministic: the list is ascending (a block-wide prefix sum, not atomics),
// and every output element of the axpy sums its terms in a fixed order whatever the launch
// geometry. Internal to device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device/cuda/kernel_types.h"

namespace hearth::gpu {

// Over the columns j < k of values[n, ld] (k = *count_dev, or count without it): the columns with
// a non-zero value for some token go, ascending, to idx_out[0 .. kept) (when idx_out is given);
// *kept_out = how many, *pairs_out = the non-zero (token, column) pairs. One block.
struct CompactArgs {
  const float* values = nullptr;
  int64_t ld = 0;
  int64_t n = 0;
  const int32_t* count_dev = nullptr;
  int64_t count = 0;
  int32_t* idx_out = nullptr;
  int32_t* kept_out = nullptr;
  uint64_t* pairs_out = nullptr;
};
void launch_compact(const CompactArgs& a, cudaStream_t stream);

// y[t, c] = Σ_{j < *count} a[t · lda + j] · W_t[idx[j], c] (+ bias[c]) for t < n, c < w_t.cols,
// overwriting y [n, w_t.cols]; idx is ascending. Terms are summed in ascending j within chunks of
// kAxpyChunk rows of W_t (one thread per column and chunk: rows [i·kAxpyChunk, (i + 1)·kAxpyChunk),
// fixed whatever the list), then the chunks in ascending order. A token's zero coefficients add
// nothing, so its sums are the same bits whichever other tokens share the list: batch-invariant.
// A row whose coefficients are all zero for a tile of tokens is not read (as on the host; only an
// inf or nan weight could tell the difference).
struct AxpyArgs {
  MatrixView w_t;                      // [rows, cols] neuron-major
  const int32_t* idx = nullptr;        // [*count_dev], ascending rows of w_t
  const int32_t* count_dev = nullptr;  // device int <= w_t.rows
  const float* a = nullptr;  // [n, lda], compact columns
  int64_t lda = 0;
  int64_t n = 0;
  const float* bias = nullptr;  // [cols] or null
  float* partial = nullptr;     // axpy_partial_floats(w_t.rows, n, cols) floats of scratch
  float* y = nullptr;
};
inline constexpr int64_t kAxpyChunk = 256;
inline int64_t axpy_partial_floats(int64_t rows, int64_t n, int64_t cols) {
  return (rows + kAxpyChunk - 1) / kAxpyChunk * n * cols;
}
void launch_axpy(const AxpyArgs& a, cudaStream_t stream);

// *dst = value, in stream order (the dense list's count).
void launch_set_count(int32_t* dst, int32_t value, cudaStream_t stream);

}  // namespace hearth::gpu
