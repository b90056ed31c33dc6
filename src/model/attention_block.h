// The Llama-family attention block as one call, so that the host forward pass and a device that
// holds the layer (the CPU stand-in, backend/standin/) run the very same code:
//   x[n, n_embd] += wo · attention(rope(wq · rms_norm(x)), rope(wk · ..), wv · .., kv cache)
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "hearth/types.h"
#include "model/weights.h"
#include "ops/attention.h"
#include "ops/rope.h"

namespace hearth {

// The attention and RoPE parameters of a model's layers for a context of n_ctx positions: the
// host session and every device build theirs from here, so their caches and angles agree.
AttentionParams attention_params(const ModelConfig& c, int64_t n_ctx, KvType kv_type);
RopeParams rope_params(const ModelConfig& c);

// The context a session gets when none is asked for: the model's, but at most 4096 tokens.
int64_t default_context(const ModelConfig& c);

// Activation buffers for up to n_batch tokens.
struct AttentionScratch {
  float* xn = nullptr;   // [n_batch, n_embd]
  float* q = nullptr;    // [n_batch, n_head * head_dim]
  float* k = nullptr;    // [n_batch, n_embd_kv]
  float* v = nullptr;    // [n_batch, n_embd_kv]
  float* att = nullptr;  // [n_batch, n_head * head_dim]
  void* workspace = nullptr;  // attention_workspace_bytes(attn, ctx.n_threads())
};

// l: attn_norm, wq, wk, wv, wo are used. k_cache / v_cache: this layer's caches
// ([n_ctx, n_head_kv, head_dim] each). Tokens are at positions pos0 .. pos0 + n - 1.
void llama_attention_block(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                           const RopeTable& rope, const LayerWeights& l, void* k_cache,
                           void* v_cache, const AttentionScratch& s, float* x, int64_t n,
                           int64_t pos0);

}  // namespace hearth
