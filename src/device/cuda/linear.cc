#include "device/cuda/linear.h"
#include "device/cuda/cublas_api.h"

#include <library_types.h>

#include "device/cuda/matmul.cuh"
#include "core/error.h"

namespace hearth::gpu {
namespace {

bool is_quantized(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }

}  // namespace

size_t gemm_act_bytes(int64_t n, int64_t cols) { return static_cast<size_t>(n * cols) * 2; }

size_t gemm_weight_bytes(DType t, int64_t rows, int64_t cols) {
  return is_quantized(t) ? static_cast<size_t>(rows * cols) * 2 : 0;
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    fail("cuBLAS error while ", what, ": ", cublas().status_name(s), " (", cublas().status_string(s),
         ")");
  }
}

void linear(const GemmContext& g, const MatrixView& w, const float* x, int64_t n, float* y,
            bool accumulate, cudaStream_t stream) {
  if (n <= 0) return;
  if (n < kGemmMinTokens || !g.handle) {
    launch_dense_matvec(w, x, w.cols, n, y, w.rows, accumulate, stream);
    return;
  }
  // Row-major Y[n, rows] = X[n, cols] · W[rows, cols]^T is, column-major, Y^T = W^T' · X^T where
  // W's rows (cols elements each) are the columns of an lda = cols matrix: op(A) = T.
  const void* a = w.data;
  cudaDataType_t a_type = CUDA_R_32F;
  const void* b = x;
  cudaDataType_t b_type = CUDA_R_32F;
  if (w.type != DType::F32) {
    const bool bf16 = w.type == DType::BF16;
    if (g.act_bytes < gemm_act_bytes(n, w.cols))
      fail("internal: cuBLAS activation scratch too small");
    launch_to_half(x, n * w.cols, bf16, g.act, stream);
    b = g.act;
    b_type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    a_type = b_type;
    if (is_quantized(w.type)) {
      if (g.weight_bytes < gemm_weight_bytes(w.type, w.rows, w.cols)) {
        fail("internal: cuBLAS weight scratch too small");
      }
      launch_dequantize_f16(w, g.weights, stream);
      a = g.weights;
    }
  }
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  const int m = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
  check_cublas(cublas().gemm_ex(g.handle, CUBLAS_OP_T, CUBLAS_OP_N, m, static_cast<int>(n), k, &alpha,
                            a, a_type, k, b, b_type, k, &beta, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               "multiplying a weight matrix (cublasGemmEx)");
}

}  // namespace hearth::gpu
