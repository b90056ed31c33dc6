// Dense matrix-vector and matrix-matrix products against weights in any supported dtype.
// Weights are in ggml layout: W has `rows` rows of `cols` contiguous elements (ne0 = cols).
// Both ops split the work over the context's thread pool and never allocate after warm-up.
// Quantized weights (Q8_0, Q4_0) multiply activations quantized to Q8 in ctx.scratch(), so a
// call invalidates scratch pointers the caller obtained earlier. Results do not depend on the
// number of threads.
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/context.h"
#include "core/dtype.h"

namespace hearth {

// y[rows] = W[rows, cols] · x[cols]
void matvec(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, float* y);

// Y[n, rows] = X[n, cols] · W[rows, cols]^T   (one output row per input row of X)
void matmul(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, int64_t n, float* y);

// One weight matrix of a product with a shared input: W[rows, cols] at w, Y[n, rows] at y.
struct MatmulPart {
  const void* w = nullptr;
  int64_t rows = 0;
  float* y = nullptr;
};

// Y_i = X[n, cols] · W_i^T for every part, all of one weight type and width: X is converted once
// and the parts' rows, taken as one stacked matrix, split over the pool in one pass (the q, k
// and v projections of a decode step wake the threads once instead of three times). The outputs
// are the same bits as one matmul per part.
void matmul_parts(cpu::CpuContext& ctx, DType wtype, int64_t cols,
                  std::span<const MatmulPart> parts, const float* x, int64_t n);

// matmul_parts over matrices held as row groups (backend/cpu/kernels/row_groups.h: every part's
// rows a multiple of 16, wtype one with gemm_row_groups). Not matmul's bits, but the same for any
// token count, batch and thread count. The one exception to "never allocate": a prompt's product
// (more than kMaxDecodeStepTokens tokens) may take a buffer per call and thread for its unpacked
// codes (kernels/row_groups.h, unpack_codes); decode steps never do.
void matmul_row_groups(cpu::CpuContext& ctx, DType wtype, int64_t cols,
                       std::span<const MatmulPart> parts, const float* x, int64_t n);

}  // namespace hearth
