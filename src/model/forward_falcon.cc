// The Falcon forward pass: the "parallel" block, where attention and FFN both read the layer
// input x and their outputs join the residual together:
//   h   = LayerNorm(x; attn_norm)
//   a   = LayerNorm(x; attn_norm_2) for Falcon-40B, else h
//   x  += wo · attention(rope_neox(wq · a, wk · a), wv · a) + ffn(h)
// with the FFN's predictor reading x itself, as in llama.cpp's and PowerInfer's build_falcon.
// wq/wk/wv are row ranges of the fused attn_qkv (arch/falcon.cc).
#include "model/forward_common.h"
#include "model/session_impl.h"
#include "ops/norm.h"

namespace hearth {

void Session::Impl::forward_falcon(int64_t n) {
  const ModelConfig& c = config;
  const Weights& w = model.weights;
  const cpu::Isa isa = ctx.isa();
  const int64_t n_embd = c.n_embd;
  float* const xs = x.f32();    // [n, n_embd] residual stream
  float* const xns = xn.f32();  // [n, n_embd] h, then wo's output
  float* const fo = ffn_out.f32();

  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    layer_norm_rows(ctx, xs, l.attn_norm, l.attn_norm_b, c.norm_eps, n, n_embd, xns);
    // The attention's input: h, or its own norm (held in ffn_out until the FFN writes there).
    const float* a = xns;
    if (l.attn_norm_2) {
      layer_norm_rows(ctx, xs, l.attn_norm_2, l.attn_norm_2_b, c.norm_eps, n, n_embd, fo);
      a = fo;
    }
    linear_shared(ctx, {{&l.wq, q.f32()}, {&l.wk, k.f32()}, {&l.wv, v.f32()}}, a, n);
    attend(il, /*rotate=*/true);

    // FFN on h, predicted from the layer input x; then x += (ffn + attention), summed in
    // llama.cpp's order.
    run_ffn(il, xns, xs, n);
    linear(ctx, l.wo, att.f32(), n, xns);
    vec_add(isa, xns, fo, n * n_embd);
    vec_add(isa, xs, xns, n * n_embd);
  }
}

}  // namespace hearth
