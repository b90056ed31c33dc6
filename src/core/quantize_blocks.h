// Quantization to the block types of core/quant_blocks.h (Q4_1, Q5_0, Q5_1, IQ4_NL and the
// 256-weight Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), the inverse of dequantize_blocks.h.
// core/quantize.h's quantize_row and quantize_row_search dispatch here.
//
// Two flavours per type. The reference follows ggml's unweighted reference algorithm for the
// type (the one llama-quantize uses without an importance matrix); it is not promised
// byte-identical to ggml's, whose float operation order it does not copy. The search minimises
// an importance-weighted squared error sum_j w_j (x_j - y_j)^2 with ggml's importance-matrix
// algorithms, and keeps, block by block, whichever of its answer and the reference's has the
// lower weighted error, so it is never worse than the reference under the weights it is given.
// Both always write valid blocks (codes in range, finite f16 scales for finite input).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth {

// y = the row x[n] in type t, by the reference algorithm; false (nothing written) when t is not
// one of these types. n must be a multiple of t's block size (the caller checks).
bool quantize_row_blocks(DType t, const float* x, void* y, int64_t n);

// The same by a faster fit where the type has one (Q4_K, Q5_K: the reference's search over
// fewer candidate scales), for blocks made at load that no file promises; else the reference.
bool quantize_row_blocks_quick(DType t, const float* x, void* y, int64_t n);

// The same by the importance-weighted search: w[n] the importance of each element (>= 0;
// nullptr: all 1). A block whose weights are all 0 is fitted as if they were all 1.
// Rows of the same values with the same weights give the same bytes (nothing random).
bool quantize_row_blocks_search(DType t, const float* x, const float* w, void* y, int64_t n);

}  // namespace hearth
