// Session::Impl::forward: what every family shares (token embeddings, the output head, the
// bookkeeping) around the family's layers (forward_<family>.cc).
#include "core/quantize.h"
#include "model/linear.h"
#include "model/session_impl.h"
#include "ops/norm.h"

namespace hearth {

void Session::Impl::forward(const int32_t* tokens, int64_t n, float* all_logits) {
  // x[n, n_embd] = token_embd[tokens]; each family's pass starts from it.
  const Matrix& embd = model.weights.token_embd;
  const int64_t n_embd = config.n_embd;
  for (int64_t t = 0; t < n; ++t) {
    dequantize_row(embd.type, embd.row(tokens[t]), x.f32() + t * n_embd, n_embd);
  }
  switch (model.family) {
    case ArchFamily::Llama: forward_llama(n); break;
    case ArchFamily::Falcon: forward_falcon(n); break;
    case ArchFamily::Opt: forward_opt(n); break;
  }
  output_head(n, all_logits);
  n_past += static_cast<int32_t>(n);
  stats.tokens += static_cast<uint64_t>(n);
  stats.weight_bytes += non_ffn_bytes;
}

// logits = output · norm(x): of every token into all_logits, else of the last one into `logits`.
void Session::Impl::output_head(int64_t n, float* all_logits) {
  const ModelConfig& c = config;
  const Weights& w = model.weights;
  const int64_t n_embd = c.n_embd;
  const float* xs = x.f32();
  float* const xns = xn.f32();
  const bool layer = c.norm == NormType::Layer;
  if (all_logits) {
    if (layer) {
      layer_norm_rows(ctx, xs, w.output_norm, w.output_norm_b, c.norm_eps, n, n_embd, xns);
    } else {
      rms_norm_rows(ctx, xs, w.output_norm, c.norm_eps, n, n_embd, xns);
    }
    linear(ctx, w.output, xns, n, all_logits);
    return;
  }
  const float* last = xs + (n - 1) * n_embd;
  if (layer) {
    layer_norm(ctx.isa(), last, w.output_norm, w.output_norm_b, c.norm_eps, n_embd, xns);
  } else {
    rms_norm(ctx.isa(), last, w.output_norm, c.norm_eps, n_embd, xns);
  }
  linear(ctx, w.output, xns, 1, logits.data());
}

}  // namespace hearth
