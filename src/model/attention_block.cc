#include "model/attention_block.h"

#include "model/linear.h"
#include "ops/norm.h"
#include "ops/vec.h"

namespace hearth {

void llama_attention_block(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                           const RopeTable& rope, const LayerWeights& l, void* k_cache,
                           void* v_cache, const AttentionScratch& s, float* x, int64_t n,
                           int64_t pos0) {
  const cpu::Isa isa = ctx.isa();
  const int n_head = static_cast<int>(c.n_head), head_dim = static_cast<int>(c.head_dim);
  rms_norm_rows(ctx, x, l.attn_norm, c.norm_eps, n, c.n_embd, s.xn);
  linear(ctx, l.wq, s.xn, n, s.q);
  linear(ctx, l.wk, s.xn, n, s.k);
  linear(ctx, l.wv, s.xn, n, s.v);
  rope.apply(s.q, n, n_head, head_dim, pos0);
  rope.apply(s.k, n, static_cast<int>(c.n_head_kv), head_dim, pos0);
  kv_store(isa, attn, s.k, 0, pos0, n, k_cache);
  kv_store(isa, attn, s.v, 0, pos0, n, v_cache);
  attention(ctx, attn, s.q, k_cache, v_cache, pos0, n, s.att, s.workspace);
  linear(ctx, l.wo, s.att, n, s.xn);
  vec_add(isa, x, s.xn, n * c.n_embd);
}

}  // namespace hearth
