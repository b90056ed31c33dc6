// Scalar host references for the CUDA kernels that have no exact twin in src/ops (whose scalar
// functions are the references for norm, rope, kv_store, attention and the activations). They
// define what the kernels compute: float activations against the exactly dequantized weights,
// summed in double so that the reference's own rounding is negligible. Plain C++, for tests.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace hearth::gpu::reference {

// y[n, rows] = x[n, cols] · W^T. y_abs (optional, same shape) = Σ |w · x| over the same terms:
// the scale that bounds the rounding error of any summation order.
void matmul(DType t, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
            float* y_abs = nullptr);

// y[n, k] = x[n, cols] · W[idx]^T + bias[idx] (bias may be null).
void gather_matvec(DType t, const void* w, int64_t rows, int64_t cols, const int32_t* idx,
                   int64_t k, const float* bias, const float* x, int64_t n, float* y,
                   float* y_abs = nullptr);

// y[n, cols] = Σ_j a[t, j] · W_t[idx_j] + bias (a is [n, k]; bias may be null).
void axpy(DType t, const void* w_t, int64_t rows, int64_t cols, const int32_t* idx, int64_t k,
          const float* a, int64_t n, const float* bias, float* y, float* y_abs = nullptr);

// The columns j < k of values[n, k] with a non-zero entry for some token, ascending, and the
// number of non-zero entries.
struct Compacted {
  std::vector<int32_t> idx;
  uint64_t pairs = 0;
};
Compacted compact_nonzero(const float* values, int64_t n, int64_t k);

}  // namespace hearth::gpu::reference
