// Dense matrix-vector and matrix-matrix products against weights in any supported dtype.
// Weights are in ggml layout: W has `rows` rows of `cols` contiguous elements (ne0 = cols).
// Both ops split the work over the context's thread pool and never allocate after warm-up.
// Quantized weights (Q8_0, Q4_0) multiply activations quantized to Q8 in ctx.scratch(), so a
// call invalidates scratch pointers the caller obtained earlier. Results do not depend on the
// number of threads.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "core/dtype.h"

namespace hearth {

// y[rows] = W[rows, cols] · x[cols]
void matvec(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, float* y);

// Y[n, rows] = X[n, cols] · W[rows, cols]^T   (one output row per input row of X)
void matmul(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, int64_t n, float* y);

}  // namespace hearth
