// Dense and row-gathered products of device weights (every stored type) with float activations,
// and the conversions the cuBLAS path needs. Launchers only: callable from host C++. Internal to
// device/cuda/; the host references are in kernels_reference.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device/cuda/kernel_types.h"

namespace hearth::gpu {

// y[t * ldy + j] (=, or += with accumulate) dot(W row r_j, x[t * ldx ..]) + bias[r_j]
// for t < n and j < count, where r_j = idx[j] (or j without idx) and count = *count_dev (or
// w.rows without it). One warp per output row, lanes over the columns (coalesced for every
// type: a warp step covers one Q8_0/Q4_0 block), tokens in tiles of kTokenTile so a weight
// element is decoded once per tile. Float math on the exactly dequantized weights (no activation
// quantization, unlike the CPU's Q8_0/Q4_0 kernels).
struct MatvecArgs {
  MatrixView w;
  const int32_t* idx = nullptr;        // [max_count] rows to read; null: 0 .. w.rows - 1
  const int32_t* count_dev = nullptr;  // device int: how many of idx; null: max_count
  int64_t max_count = 0;               // bound on the rows computed (w.rows without idx)
  const float* x = nullptr;            // [n, ldx]
  int64_t ldx = 0;
  int64_t n = 0;
  const float* bias = nullptr;  // [w.rows], indexed by row id; null: none
  float* y = nullptr;           // [n, ldy]
  int64_t ldy = 0;
  bool accumulate = false;
};
void launch_matvec(const MatvecArgs& a, cudaStream_t stream);

// launch_matvec over every row: y[t * ldy + r] (=, or += with accumulate) W row r · x[t * ldx ..].
void launch_dense_matvec(const MatrixView& w, const float* x, int64_t ldx, int64_t n, float* y,
                         int64_t ldy, bool accumulate, cudaStream_t stream);

// out[rows, cols] = W as IEEE half (round to nearest even): the cuBLAS path's copy of a quantized
// matrix.
void launch_dequantize_f16(const MatrixView& w, void* out, cudaStream_t stream);

// out[count] = x as half (bf16 false) or bfloat16 (bf16 true), round to nearest even.
void launch_to_half(const float* x, int64_t count, bool bf16, void* out, cudaStream_t stream);

}  // namespace hearth::gpu
