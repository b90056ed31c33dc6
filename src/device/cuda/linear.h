// y[n, rows] = x[n, cols] · W^T for device weights of any stored type: the attention block's
// projections. Up to kGemmMinTokens - 1 tokens (kernel_types.h), and every batch of a context
// without a cuBLAS handle (sparse sessions: batch invariance), use the matvec kernel (one weight
// pass per tile of kTokenTile tokens, each token's sums the same bits in any tile); longer
// batches of dense sessions (prompts) use cuBLAS:
//   F32   cublasGemmEx on the weights as they are, F32 activations;
//   F16   cublasGemmEx on the weights as they are, activations rounded to F16;
//   BF16  the same with activations rounded to BF16;
//   Q8_0, Q4_0  the matrix dequantized into an F16 scratch first (one pass, rows·cols halves),
//         then as F16.
// Every path accumulates in F32 (CUBLAS_COMPUTE_32F, no TF32). The F16/BF16 activation rounding
// is of the same order as the CPU's Q8_0 activation quantization. Internal to device/cuda/.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "device/cuda/kernel_types.h"

namespace hearth::gpu {

// What the cuBLAS path needs; the handle is bound to the stream linear() is called with.
struct GemmContext {
  cublasHandle_t handle = nullptr;
  void* act = nullptr;  // activations as F16/BF16: n · cols halves at least
  size_t act_bytes = 0;
  void* weights = nullptr;  // a quantized matrix as F16: rows · cols halves at least
  size_t weight_bytes = 0;
};

// Bytes of GemmContext::act for n tokens of `cols` columns, and of GemmContext::weights for
// one matrix (0 for types cuBLAS reads directly).
size_t gemm_act_bytes(int64_t n, int64_t cols);
size_t gemm_weight_bytes(DType t, int64_t rows, int64_t cols);

// y (=, or += with accumulate) x · W^T; x[n, w.cols], y[n, w.rows] contiguous.
void linear(const GemmContext& g, const MatrixView& w, const float* x, int64_t n, float* y,
            bool accumulate, cudaStream_t stream);

// Throws hearth::Error naming `what` when s is not CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t s, const char* what);

}  // namespace hearth::gpu
