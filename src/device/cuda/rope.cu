#include "device/cuda/cuda_check.h"
#include "device/cuda/device_util.cuh"
#include "device/cuda/rope.cuh"

namespace hearth::gpu {
namespace {

constexpr int kRopeThreads = 128;

// One thread per rotated pair; grid.y is the token.
__global__ void rope_kernel(float* x, int n_head, int head_dim, int64_t token_stride,
                            const float* table, int n_rot, bool neox, int64_t pos0) {
  const int half = n_rot / 2;
  const int pair = blockIdx.x * kRopeThreads + threadIdx.x;
  if (pair >= n_head * half) return;
  const int h = pair / half, i = pair % half;
  const int64_t t = blockIdx.y;
  const float* cs = table + (pos0 + t) * n_rot;
  const float c = cs[2 * i], s = cs[2 * i + 1];
  float* v = x + t * token_stride + static_cast<int64_t>(h) * head_dim;
  const int i0 = neox ? i : 2 * i;
  const int i1 = neox ? i + half : 2 * i + 1;
  const float x0 = v[i0], x1 = v[i1];
  v[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  v[i1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

}  // namespace

void launch_rope(float* x, int64_t n_tokens, int n_head, int head_dim, int64_t token_stride,
                 const float* table, int n_rot, bool neox, int64_t pos0, cudaStream_t stream) {
  if (n_tokens <= 0 || n_rot < 2) return;
  const dim3 grid(blocks_for(static_cast<int64_t>(n_head) * (n_rot / 2), kRopeThreads),
                  static_cast<unsigned>(n_tokens));
  rope_kernel<<<grid, kRopeThreads, 0, stream>>>(x, n_head, head_dim, token_stride, table, n_rot,
                                                 neox, pos0);
  check_launch("launching rope");
}

}  // namespace hearth::gpu
