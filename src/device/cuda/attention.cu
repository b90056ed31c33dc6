#include <cuda_fp16.h>

#include "device/cuda/attention.cuh"
#include "device/cuda/cuda_check.h"
#include "device/cuda/device_util.cuh"

namespace hearth::gpu {
namespace {

constexpr int kStoreThreads = 256;
constexpr int kAttnWarps = 8;
constexpr int kPerLane = kMaxHeadDim / 32;  // head elements each lane accumulates

__global__ void kv_store_f32_kernel(const float* src, int64_t count, float* dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) dst[i] = src[i];
}

__global__ void kv_store_f16_kernel(const float* src, int64_t count, __half* dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) dst[i] = __float2half_rn(src[i]);
}

template <bool F16>
__device__ __forceinline__ float kv_elem(const void* base, int64_t i) {
  if constexpr (F16) {
    return __half2float(static_cast<const __half*>(base)[i]);
  } else {
    return static_cast<const float*>(base)[i];
  }
}

// One block per (head, token). Each warp walks every kAttnWarps-th visible key with an online
// softmax (running max m, running sum l, accumulator rescaled when m grows); the warps' partial
// results are then merged in a fixed order, so results are deterministic.
template <bool F16>
__global__ void attention_kernel(AttentionShape s, const void* k_cache, const void* v_cache,
                                 const float* q, int64_t pos0, float* out) {
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hd = s.head_dim;
  const int kvh = h / (s.n_head / s.n_head_kv);
  const int64_t row_stride = static_cast<int64_t>(s.n_head_kv) * hd;
  const int64_t head_off = static_cast<int64_t>(kvh) * hd;
  const int64_t q_off = (t * s.n_head + h) * hd;

  __shared__ float qs[kMaxHeadDim];
  __shared__ float warp_m[kAttnWarps], warp_l[kAttnWarps];
  __shared__ float warp_acc[kAttnWarps][kMaxHeadDim];
  for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[q_off + d];
  __syncthreads();

  const int64_t n_vis = pos0 + t + 1;
  float m = -INFINITY, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  for (int64_t j = warp; j < n_vis; j += kAttnWarps) {
    const int64_t base = j * row_stride + head_off;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) dot += qs[d] * kv_elem<F16>(k_cache, base + d);
    }
    const float score = warp_sum(dot) * s.scale;
    const float m_new = fmaxf(m, score);
    const float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
    const float p = expf(score - m_new);
    l = l * corr + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) acc[i] = acc[i] * corr + p * kv_elem<F16>(v_cache, base + d);
    }
    m = m_new;
  }
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) warp_acc[warp][d] = acc[i];
  }
  __syncthreads();

  // Key 0 is visible to every token, so warp 0 saw a finite score and max_m is finite; a warp that
  // saw no key has m = -inf and weighs exp(-inf) = 0.
  float max_m = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) max_m = fmaxf(max_m, warp_m[w]);
  float weight[kAttnWarps];
  float sum = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) {
    weight[w] = expf(warp_m[w] - max_m);
    sum += warp_l[w] * weight[w];
  }
  const float inv = 1.0f / sum;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) o += warp_acc[w][d] * weight[w];
    out[q_off + d] = o * inv;
  }
}

}  // namespace

void launch_kv_store(bool f16, const float* src, int64_t n_tokens, int64_t row, int64_t pos0,
                     void* cache, cudaStream_t stream) {
  const int64_t count = n_tokens * row;
  if (count <= 0) return;
  const unsigned blocks = blocks_for(count, kStoreThreads);
  if (f16) {
    kv_store_f16_kernel<<<blocks, kStoreThreads, 0, stream>>>(
        src, count, static_cast<__half*>(cache) + pos0 * row);
  } else {
    kv_store_f32_kernel<<<blocks, kStoreThreads, 0, stream>>>(
        src, count, static_cast<float*>(cache) + pos0 * row);
  }
  check_launch("launching kv_store");
}

void launch_attention(const AttentionShape& s, bool f16, const void* k_cache, const void* v_cache,
                      const float* q, int64_t pos0, int64_t n_tokens, float* out,
                      cudaStream_t stream) {
  if (n_tokens <= 0) return;
  if (s.head_dim > kMaxHeadDim || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0) {
    fail("internal: unsupported attention shape (head_dim ", s.head_dim, ", ", s.n_head, " heads, ",
         s.n_head_kv, " KV heads)");
  }
  const dim3 grid(static_cast<unsigned>(s.n_head), static_cast<unsigned>(n_tokens));
  if (f16) {
    attention_kernel<true><<<grid, kAttnWarps * 32, 0, stream>>>(s, k_cache, v_cache, q, pos0, out);
  } else {
    attention_kernel<false>
        <<<grid, kAttnWarps * 32, 0, stream>>>(s, k_cache, v_cache, q, pos0, out);
  }
  check_launch("launching attention");
}

}  // namespace hearth::gpu
