// Row conversion between F32 and the stored dtypes. These are the reference implementations used
// to write model files: quantization reproduces ggml's reference rounding exactly, so a tensor
// quantized here is byte-identical to one quantized by llama.cpp from the same F32 values.
// Kernels that need speed (activation quantization, dequantization in matmul) live in
// backend/cpu/kernels and are tested against these.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth {

// y = x converted to dtype t; x[n] floats, y receives row_bytes(t, n) bytes.
// n must be a multiple of dtype_block_size(t). The types of core/quant_blocks.h go through ggml's
// reference algorithms (core/quantize_blocks.h), which are not promised byte-identical.
void quantize_row(DType t, const float* x, void* y, int64_t n);

// quantize_row by a faster, slightly coarser fit where the type has one (Q4_K and Q5_K: 5
// candidate scales per 32-weight group instead of 20 and 15, about 3x faster), for matrices made
// at load (input-major copies) that no file or llama.cpp result promises.
void quantize_row_quick(DType t, const float* x, void* y, int64_t n);

// y[n] = the values of the row x stored in dtype t.
void dequantize_row(DType t, const void* x, float* y, int64_t n);

// Converts a [rows, cols] F32 matrix row by row; y receives rows * row_bytes(t, cols) bytes.
void quantize_rows(DType t, const float* x, void* y, int64_t rows, int64_t cols);

// ggml's reference block quantizers, exposed for tests and for kernels that mirror them.
void quantize_block_q8_0(const float* x, BlockQ8_0* y);  // x[32]
void quantize_block_q4_0(const float* x, BlockQ4_0* y);  // x[32]

// Q4_0 with the scale and codes of each block chosen together for the least weighted squared
// error sum_j w_j (x_j - d q_j)^2 (quantize_search.cc; w = nullptr weighs every element 1): valid
// blocks, never worse than ggml's reference under the same weights, not byte-identical to it.
// `hearth quantize` writes weights with it, w from an importance matrix when given one.
// quantize_row_search is quantize_row with it for Q4_0 (w[n] or nullptr), with the weighted
// searches of core/quantize_blocks.h for the types of core/quant_blocks.h; other types ignore w.
void quantize_block_q4_0_search(const float* x, const float* w, BlockQ4_0* y);  // x[32], w[32]
void quantize_row_search(DType t, const float* x, const float* w, void* y, int64_t n);

}  // namespace hearth
