#include "model/attention_block.h"

#include <algorithm>

#include "model/linear.h"
#include "ops/norm.h"
#include "ops/vec.h"

namespace hearth {

AttentionParams attention_params(const ModelConfig& c, int64_t n_ctx, KvType kv_type) {
  AttentionParams a;
  a.n_head = static_cast<int>(c.n_head);
  a.n_head_kv = static_cast<int>(c.n_head_kv);
  a.head_dim = static_cast<int>(c.head_dim);
  a.n_ctx = n_ctx;
  a.kv_type = kv_type == KvType::F16 ? DType::F16 : DType::F32;
  return a;
}

RopeParams rope_params(const ModelConfig& c) {
  RopeParams rp;
  rp.n_rot = static_cast<int>(c.n_rot);
  rp.freq_base = c.rope_freq_base;
  rp.style = c.rope_type == RopeType::Neox ? RopeStyle::Neox : RopeStyle::Normal;
  return rp;
}

int64_t default_context(const ModelConfig& c) {
  // Like llama.cpp: a 128K-token model would otherwise take gigabytes of KV cache for a short chat.
  return std::min<int64_t>(c.n_ctx_train, 4096);
}

void llama_attention_block(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                           const RopeTable& rope, const LayerWeights& l, void* k_cache,
                           void* v_cache, const AttentionScratch& s, float* x, int64_t n,
                           int64_t pos0) {
  const cpu::Isa isa = ctx.isa();
  const int n_head = static_cast<int>(c.n_head), head_dim = static_cast<int>(c.head_dim);
  rms_norm_rows(ctx, x, l.attn_norm, c.norm_eps, n, c.n_embd, s.xn);
  linear_shared(ctx, {{&l.wq, s.q}, {&l.wk, s.k}, {&l.wv, s.v}}, s.xn, n);
  rope.apply(s.q, n, n_head, head_dim, pos0);
  rope.apply(s.k, n, static_cast<int>(c.n_head_kv), head_dim, pos0);
  kv_store(isa, attn, s.k, 0, pos0, n, k_cache);
  kv_store(isa, attn, s.v, 0, pos0, n, v_cache);
  attention(ctx, attn, s.q, k_cache, v_cache, pos0, n, s.att, s.workspace);
  linear(ctx, l.wo, s.att, n, s.xn);
  vec_add(isa, x, s.xn, n * c.n_embd);
}

}  // namespace hearth
