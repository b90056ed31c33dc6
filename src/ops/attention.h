// Causal multi-head attention with grouped-query heads over a per-layer KV cache.
//
// Cache layout (per layer, one for K and one for V), elements F32 or F16: [n_ctx, n_head_kv,
// head_dim], one row of n_head_kv · head_dim elements per position, or with head_major
// [n_head_kv, n_ctx, head_dim], each KV head's rows one stretch that a decode step reads as a
// stream (kv_index). New positions are written with kv_store() before attention() reads them.
//
// attention() computes, for every query token t (at position pos0 + t) and head h,
//   out[t, h] = Σ_{lo <= j <= pos0 + t} softmax_j(scale · q[t, h] · K[j, kvh]) · V[j, kvh]
// with lo = 0, or pos0 + t - window + 1 with a sliding window (llama.cpp's n_swa), kvh = h /
// (n_head / n_head_kv), the maximum subtracted before exponentiating, and float accumulation (F16
// cache elements are widened exactly; q stays float). The work is split over the context's threads
// by groups of up to eight queries that share a KV head, so each K/V row read is used several times
// (GQA heads in decode, neighbouring tokens in prefill). Results do not depend on the number of
// threads: every query's arithmetic is the same whichever group it lands in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/context.h"
#include "backend/cpu/dispatch.h"
#include "core/dtype.h"

namespace hearth {

struct AttentionParams {
  int n_head = 0;
  int n_head_kv = 0;  // divides n_head
  int head_dim = 0;
  int64_t n_ctx = 0;           // positions each cache holds
  DType kv_type = DType::F32;  // F32 or F16
  float scale = 0.0f;          // 0 means 1 / sqrt(head_dim)
  int64_t window = 0;          // a query at position p sees keys p - window + 1 .. p; 0: all
  float softcap = 0.0f;        // scores s become softcap · tanh(s / softcap); 0: left as they are
  bool head_major = false;     // the caches' layout (above); the sessions' caches are head-major
};

// The element of position pos, KV head h and dimension d in a cache of p's layout.
inline int64_t kv_index(const AttentionParams& p, int64_t pos, int h, int d) {
  return p.head_major ? (h * p.n_ctx + pos) * p.head_dim + d
                      : (pos * p.n_head_kv + h) * p.head_dim + d;
}

// Bytes of one cache (K or V): n_ctx · n_head_kv · head_dim elements of kv_type.
size_t kv_cache_bytes(const AttentionParams& p);

// Writes rows for positions pos0 .. pos0 + n_tokens - 1:
//   src[n_tokens, n_head_kv · head_dim] (float) -> the cache's positions pos0 + t (kv_type; F16
// rounds to nearest even). src rows are src_stride floats apart (0 means n_head_kv · head_dim, i.e.
// contiguous), so a K or V slice of a fused QKV projection can be stored directly.
void kv_store(cpu::Isa isa, const AttentionParams& p, const float* src, int64_t src_stride,
              int64_t pos0, int64_t n_tokens, void* cache);

// Workspace attention() needs with a context of n_threads threads, in bytes (64-byte aligned
// buffer). Size it once for the session's n_ctx and reuse it for every layer and token.
size_t attention_workspace_bytes(const AttentionParams& p, int n_threads);

// out[n_tokens, n_head, head_dim] = attention of q[n_tokens, n_head, head_dim] over the cache rows
// 0 .. pos0 + n_tokens - 1 of k_cache and v_cache (p's layout, kv_type),
// causally masked. Requires pos0 + n_tokens <= n_ctx, those cache rows already stored, and
// `workspace` of attention_workspace_bytes(p, ctx.n_threads()) bytes, 64-byte aligned. out must not
// overlap q. Allocates nothing.
void attention(cpu::CpuContext& ctx, const AttentionParams& p, const float* q, const void* k_cache,
               const void* v_cache, int64_t pos0, int64_t n_tokens, float* out, void* workspace);

}  // namespace hearth
