// Dequantization of the block types of core/quant_blocks.h (the legacy types beyond Q8_0/Q4_0,
// the K-quants and the IQ4 types). core/quantize.h's dequantize_row dispatches here.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth {

// y[n] = the row x of type t; false (nothing written) when t is not one of these types.
// n must be a multiple of t's block size (the caller checks).
bool dequantize_row_blocks(DType t, const void* x, float* y, int64_t n);

}  // namespace hearth
