#include "device/cuda/activation.cuh"
#include "device/cuda/cuda_check.h"
#include "device/cuda/device_util.cuh"

namespace hearth::gpu {
namespace {

constexpr int kThreads = 256;
// The constants of ops/activation.cc's gelu_ref.
constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

__device__ __forceinline__ float relu(float x) { return x > 0.0f ? x : 0.0f; }

__device__ __forceinline__ float act_fn(FfnActivation act, float x) {
  switch (act) {
    case FfnActivation::Silu:
      return x / (1.0f + expf(-x));
    case FfnActivation::Relu:
      return relu(x);
    case FfnActivation::Relu2: {
      const float r = relu(x);
      return r * r;
    }
    case FfnActivation::Gelu:
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
  }
  return x;
}

// Element (t, j) of an [n, cols] grid of threads: grid.y is the token.
__device__ __forceinline__ int64_t column() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__global__ void activate_kernel(FfnActivation act, const float* x, int64_t n, float* y) {
  const int64_t i = column();
  if (i < n) y[i] = act_fn(act, x[i]);
}

__global__ void act_mask_kernel(FfnActivation act, float threshold, float* f, int64_t k,
                                int64_t ld) {
  const int64_t j = column();
  if (j >= k) return;
  float* p = f + blockIdx.y * ld + j;
  const float v = act_fn(act, *p);
  const bool fires = threshold > 0.0f ? fabsf(v) > threshold : v != 0.0f;
  *p = fires ? v : 0.0f;
}

__global__ void score_mask_kernel(float threshold, float* score, int64_t k, int64_t ld) {
  const int64_t j = column();
  if (j >= k) return;
  float* p = score + blockIdx.y * ld + j;
  *p = *p >= threshold ? 1.0f : 0.0f;
}

__global__ void glu_kernel(GluArgs a) {
  const int64_t jj = column();
  if (jj >= *a.count_dev) return;
  const int64_t at = blockIdx.y * a.ld + jj;
  float u = a.u[at];
  float v;
  if (a.g) {
    if (a.up_relu) u = relu(u);
    v = act_fn(a.act, a.g[at]) * u;
  } else {
    v = act_fn(a.act, u);
  }
  if (a.mask && a.mask[blockIdx.y * a.ld + a.idx[jj]] == 0.0f) v = 0.0f;
  a.u[at] = v;
}

__global__ void oracle_combine_kernel(bool up_relu, const float* u, const float* f,
                                      const int32_t* idx, const int32_t* count, int64_t ld,
                                      float* a) {
  const int64_t jj = column();
  if (jj >= *count) return;
  const int64_t at = blockIdx.y * ld + jj;
  const float full = f[blockIdx.y * ld + idx[jj]];
  if (u) {
    const float up = up_relu ? relu(u[at]) : u[at];
    a[at] = up * full;
  } else {
    a[at] = full;
  }
}

__global__ void abs_mask_kernel(float threshold, float* a, const int32_t* count, int64_t ld) {
  const int64_t jj = column();
  if (jj >= *count) return;
  float* p = a + blockIdx.y * ld + jj;
  if (!(fabsf(*p) > threshold)) *p = 0.0f;
}

dim3 grid_2d(int64_t cols, int64_t n) {
  return dim3(blocks_for(cols, kThreads), static_cast<unsigned>(n));
}

}  // namespace

void launch_activate(FfnActivation act, const float* x, int64_t n, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  activate_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(act, x, n, y);
  check_launch("launching activate");
}

void launch_act_mask(FfnActivation act, float threshold, float* f, int64_t n, int64_t k, int64_t ld,
                     cudaStream_t stream) {
  if (n <= 0 || k <= 0) return;
  act_mask_kernel<<<grid_2d(k, n), kThreads, 0, stream>>>(act, threshold, f, k, ld);
  check_launch("launching act_mask");
}

void launch_score_mask(float threshold, float* score, int64_t n, int64_t k, int64_t ld,
                       cudaStream_t stream) {
  if (n <= 0 || k <= 0) return;
  score_mask_kernel<<<grid_2d(k, n), kThreads, 0, stream>>>(threshold, score, k, ld);
  check_launch("launching score_mask");
}

void launch_glu(const GluArgs& a, cudaStream_t stream) {
  if (a.n <= 0 || a.max_count <= 0) return;
  glu_kernel<<<grid_2d(a.max_count, a.n), kThreads, 0, stream>>>(a);
  check_launch("launching glu");
}

void launch_oracle_combine(bool up_relu, const float* u, const float* f, const int32_t* idx,
                           const int32_t* count_dev, int64_t max_count, int64_t n, int64_t ld,
                           float* a, cudaStream_t stream) {
  if (n <= 0 || max_count <= 0) return;
  oracle_combine_kernel<<<grid_2d(max_count, n), kThreads, 0, stream>>>(up_relu, u, f, idx,
                                                                        count_dev, ld, a);
  check_launch("launching oracle_combine");
}

void launch_abs_mask(float threshold, float* a, const int32_t* count_dev, int64_t max_count,
                     int64_t n, int64_t ld, cudaStream_t stream) {
  if (n <= 0 || max_count <= 0) return;
  abs_mask_kernel<<<grid_2d(max_count, n), kThreads, 0, stream>>>(threshold, a, count_dev, ld);
  check_launch("launching abs_mask");
}

}  // namespace hearth::gpu
