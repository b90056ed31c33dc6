// KV cache writes and causal grouped-query attention on the device, the contract of
// ops/attention.h: cache [n_ctx, n_head_kv, head_dim] per layer (and sequence), F32 or F16
// elements; out[t, h] = Σ_{j <= pos0 + t} softmax_j(scale · q[t, h] · K[j, kvh]) · V[j, kvh] with
// kvh = h / (n_head / n_head_kv), the maximum subtracted, float accumulation. Decode (one query
// token) and prompts (several) take the same kernel: one block per (head, token). Internal to
// device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hearth::gpu {

// Widest head the attention kernel takes (its per-lane accumulators are sized for it).
inline constexpr int kMaxHeadDim = 256;

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;   // divides n_head
  int head_dim = 0;    // <= kMaxHeadDim
  float scale = 0.0f;  // 1 / sqrt(head_dim)
};

// cache[pos0 + t, :] = src[t, :] for t < n_tokens, rows of `row` elements (n_head_kv · head_dim);
// f16: rounded to nearest even, as the host's fp32_to_fp16.
void launch_kv_store(bool f16, const float* src, int64_t n_tokens, int64_t row, int64_t pos0,
                     void* cache, cudaStream_t stream);

// out[n_tokens, n_head, head_dim] = attention of q[n_tokens, n_head, head_dim] over cache rows
// 0 .. pos0 + n_tokens - 1 (already stored), causally masked.
void launch_attention(const AttentionShape& s, bool f16, const void* k_cache, const void* v_cache,
                      const float* q, int64_t pos0, int64_t n_tokens, float* out,
                      cudaStream_t stream);

}  // namespace hearth::gpu
