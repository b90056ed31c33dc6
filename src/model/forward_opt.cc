// The OPT forward pass: pre-LayerNorm blocks with biases on every projection.
//   x   = token_embd[tok] + position_embd[pos + pos_offset]
//   x  += wo · attention(wq · h + bq, wk · h + bk, wv · h + bv) + bo     h = LayerNorm(x; attn_norm)
//   x  += ffn(LayerNorm(x; ffn_norm))          up and down biases in the FFN executor; the
//                                              predictor reads x before the norm
//   logits = token_embd · LayerNorm(x; output_norm)   (tied output)
// No RoPE: positions enter only through the embedding.
#include "core/error.h"
#include "core/quantize.h"
#include "model/forward_common.h"
#include "model/session_impl.h"
#include "ops/norm.h"

namespace hearth {

void Session::Impl::forward_opt(int64_t n) {
  const ModelConfig& c = config;
  const Weights& w = model.weights;
  const cpu::Isa isa = ctx.isa();
  const int64_t n_embd = c.n_embd;
  float* const xs = x.f32();    // [n, n_embd] residual stream
  float* const xns = xn.f32();  // [n, n_embd] normed input / projection output

  // The position table ends the context: there is nothing to read past its last row.
  const int64_t n_pos = w.pos_embd.rows - w.pos_offset;
  // x holds the token embeddings (forward.cc); add the learned position of each token.
  for (int64_t t = 0; t < n; ++t) {
    if (row_pos[t] >= n_pos) {
      fail("position ", row_pos[t], " is past the ", n_pos, " learned positions of this ", c.arch,
           " model; use a context of at most ", n_pos, " tokens");
    }
    dequantize_row(w.pos_embd.type, w.pos_embd.row(row_pos[t] + w.pos_offset), xns, n_embd);
    vec_add(isa, xs + t * n_embd, xns, n_embd);
  }

  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    layer_norm_rows(ctx, xs, l.attn_norm, l.attn_norm_b, c.norm_eps, n, n_embd, xns);
    linear_shared(ctx, {{&l.wq, q.f32()}, {&l.wk, k.f32()}, {&l.wv, v.f32()}}, xns, n);
    add_bias(isa, q.f32(), l.bq, n, l.wq.rows);
    add_bias(isa, k.f32(), l.bk, n, l.wk.rows);
    add_bias(isa, v.f32(), l.bv, n, l.wv.rows);
    attend(il, /*rotate=*/false);
    linear_bias(ctx, l.wo, l.bo, att.f32(), n, xns);
    vec_add(isa, xs, xns, n * n_embd);

    layer_norm_rows(ctx, xs, l.ffn_norm, l.ffn_norm_b, c.norm_eps, n, n_embd, xns);
    run_ffn(il, xns, xs, n);
    vec_add(isa, xs, ffn_out.f32(), n * n_embd);
  }
}

}  // namespace hearth
