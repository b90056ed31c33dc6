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
  float* const xs = x.f32();
  float* const xns = xn.f32();

  for (size_t il = 0; il < w.layers.size(); ++il) {
    // x += wo · attention(rope(wq · norm(x)), kv cache), per sequence (run_attention)
    run_attention(il, n);
    // x += ffn(norm(x)); the predictor reads x itself (sparse/ffn.h).
    rms_norm_rows(ctx, xs, w.layers[il].ffn_norm, c.norm_eps, n, c.n_embd, xns);
    run_ffn(il, xns, xs, n);
    vec_add(isa, xs, ffn_out.f32(), n * c.n_embd);
  }
}

}  // namespace hearth
