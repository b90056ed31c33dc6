#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "device/cuda/cuda_check.h"
#include "device/cuda/device_util.cuh"
#include "device/cuda/matmul.cuh"

namespace hearth::gpu {
namespace {

constexpr int kMatvecWarps = 4;  // output rows per block
constexpr int kElemThreads = 256;

template <DType T>
__global__ void matvec_kernel(MatvecArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kMatvecWarps + threadIdx.x / 32;
  const int64_t count = a.count_dev ? *a.count_dev : a.max_count;
  if (j >= count) return;  // the whole warp leaves: the shuffles below see all 32 lanes
  const int64_t r = a.idx ? a.idx[j] : j;
  const uint8_t* row = static_cast<const uint8_t*>(a.w.data) + r * a.w.row_bytes;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int64_t left = a.n - t0;
  const int nt = left < kTokenTile ? static_cast<int>(left) : kTokenTile;
  const float* x = a.x + t0 * a.ldx;

  float acc[kTokenTile];
#pragma unroll
  for (int t = 0; t < kTokenTile; ++t) acc[t] = 0.0f;
  for (int64_t c = lane; c < a.w.cols; c += 32) {
    const float wc = load_elem<T>(row, c);
#pragma unroll
    for (int t = 0; t < kTokenTile; ++t) {
      if (t < nt) acc[t] += wc * x[t * a.ldx + c];
    }
  }
#pragma unroll
  for (int t = 0; t < kTokenTile; ++t) acc[t] = warp_sum(acc[t]);
  if (lane != 0) return;
  for (int t = 0; t < nt; ++t) {
    float v = acc[t];
    if (a.bias) v += a.bias[r];
    float* y = a.y + (t0 + t) * a.ldy + j;
    *y = a.accumulate ? *y + v : v;
  }
}

template <DType T>
__global__ void dequantize_f16_kernel(MatrixView w, __half* out) {
  const int64_t total = w.rows * w.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t r = i / w.cols, c = i % w.cols;
    out[i] =
        __float2half_rn(load_elem<T>(static_cast<const uint8_t*>(w.data) + r * w.row_bytes, c));
  }
}

__global__ void to_half_kernel(const float* x, int64_t count, __half* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2half_rn(x[i]);
}

__global__ void to_bf16_kernel(const float* x, int64_t count, __nv_bfloat16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2bfloat16_rn(x[i]);
}

// Grid-stride loops need no more blocks than this to fill any current GPU.
unsigned capped_blocks(int64_t n) {
  const unsigned b = blocks_for(n, kElemThreads);
  return b < 4096 ? b : 4096;
}

}  // namespace

void launch_matvec(const MatvecArgs& a, cudaStream_t stream) {
  if (a.n <= 0 || a.max_count <= 0) return;
  const dim3 grid(blocks_for(a.max_count, kMatvecWarps), blocks_for(a.n, kTokenTile));
  dispatch_dtype(a.w.type, [&](auto tag) {
    matvec_kernel<decltype(tag)::value><<<grid, kMatvecWarps * 32, 0, stream>>>(a);
  });
  check_launch("launching matvec");
}

void launch_dense_matvec(const MatrixView& w, const float* x, int64_t ldx, int64_t n, float* y,
                         int64_t ldy, bool accumulate, cudaStream_t stream) {
  MatvecArgs a;
  a.w = w;
  a.max_count = w.rows;
  a.x = x;
  a.ldx = ldx;
  a.n = n;
  a.y = y;
  a.ldy = ldy;
  a.accumulate = accumulate;
  launch_matvec(a, stream);
}

void launch_dequantize_f16(const MatrixView& w, void* out, cudaStream_t stream) {
  const int64_t total = w.rows * w.cols;
  if (total == 0) return;
  dispatch_dtype(w.type, [&](auto tag) {
    dequantize_f16_kernel<decltype(tag)::value>
        <<<capped_blocks(total), kElemThreads, 0, stream>>>(w, static_cast<__half*>(out));
  });
  check_launch("launching dequantize_f16");
}

void launch_to_half(const float* x, int64_t count, bool bf16, void* out, cudaStream_t stream) {
  if (count == 0) return;
  if (bf16) {
    to_bf16_kernel<<<blocks_for(count, kElemThreads), kElemThreads, 0, stream>>>(
        x, count, static_cast<__nv_bfloat16*>(out));
  } else {
    to_half_kernel<<<blocks_for(count, kElemThreads), kElemThreads, 0, stream>>>(
        x, count, static_cast<__half*>(out));
  }
  check_launch("launching to_half");
}

}  // namespace hearth::gpu
