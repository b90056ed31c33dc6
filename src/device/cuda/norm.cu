#include "device/cuda/cuda_check.h"
#include "device/cuda/norm.cuh"

namespace hearth::gpu {
namespace {

constexpr int kNormThreads = 256;

// One block per row.
__global__ void rms_norm_kernel(const float* x, const float* w, float eps, int64_t n, float* y) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    sum += static_cast<double>(__fmul_rn(xr[i], xr[i]));
  }
  __shared__ double partial[kNormThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kNormThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float mean = static_cast<float>(partial[0] / static_cast<double>(n));
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
  // Every read of the row happened before the barriers above, so y may alias x.
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    const float v = __fmul_rn(xr[i], scale);
    yr[i] = w ? __fmul_rn(v, w[i]) : v;
  }
}

}  // namespace

void launch_rms_norm(const float* x, const float* w, float eps, int64_t n_rows, int64_t n, float* y,
                     cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(n_rows), kNormThreads, 0, stream>>>(x, w, eps, n, y);
  check_launch("launching rms_norm");
}

}  // namespace hearth::gpu
