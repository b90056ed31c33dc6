// The Llama-family forward pass (llama, bamboo), written as direct calls layer by layer (DESIGN.md
// section 5). Decode (one token) uses matrix-vector products; prompt chunks use matrix-matrix
// products.
#include "model/forward_common.h"
#include "model/session_impl.h"
#include "ops/norm.h"

namespace hearth {

void Session::Impl::forward_llama(int64_t n) {
  const ModelConfig& c = config;
  const Weights& w = model.weights;
  const cpu::Isa isa = ctx.isa();
  const int64_t n_embd = c.n_embd;
  float* const xs = x.f32();
  float* const xns = xn.f32();

  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    // Attention block: x += wo · attention(rope(wq · norm(x)), kv cache)
    rms_norm_rows(ctx, xs, l.attn_norm, c.norm_eps, n, n_embd, xns);
    linear(ctx, l.wq, xns, n, q.f32());
    linear(ctx, l.wk, xns, n, k.f32());
    linear(ctx, l.wv, xns, n, v.f32());
    attend(il, /*rotate=*/true);
    linear(ctx, l.wo, att.f32(), n, xns);
    vec_add(isa, xs, xns, n * n_embd);

    // FFN block: x += ffn(norm(x)); the predictor reads x itself (sparse/ffn.h).
    rms_norm_rows(ctx, xs, l.ffn_norm, c.norm_eps, n, n_embd, xns);
    ffn.run(ctx, ffn_weights[il], xns, xs, n, ffn_out.f32(), stats);
    vec_add(isa, xs, ffn_out.f32(), n * n_embd);
  }
}

}  // namespace hearth
