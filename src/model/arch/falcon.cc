// The Falcon block (llama.cpp's and PowerInfer's "falcon"): LayerNorm with bias, one fused QKV
// projection in the "jploski" row order (all Q heads, then K, then V; multi-query for 7B, grouped
// for 40B), NeoX RoPE, and attention and FFN side by side on the same input. Falcon-40B adds
// attn_norm_2, the attention's own norm (attn_norm then feeds only the FFN). The FFN is ungated:
// up, activation, down. PowerInfer's files store down transposed (ffn_down_t) and add predictors.
#include "model/weights.h"

namespace hearth {

void visit_falcon_weights(const ModelConfig& c, Weights& w, const WeightVisitor& visit) {
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_embd_kv();
  visit({"token_embd.weight", c.n_embd, c.n_vocab, true, &w.token_embd, nullptr});
  visit({"output_norm.weight", c.n_embd, 1, true, nullptr, &w.output_norm});
  visit({"output_norm.bias", c.n_embd, 1, true, nullptr, &w.output_norm_b});
  visit({"output.weight", c.n_embd, c.n_vocab, false, &w.output, nullptr});
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    visit({p + "attn_norm.weight", c.n_embd, 1, true, nullptr, &l.attn_norm});
    visit({p + "attn_norm.bias", c.n_embd, 1, true, nullptr, &l.attn_norm_b});
    visit({p + "attn_norm_2.weight", c.n_embd, 1, false, nullptr, &l.attn_norm_2});
    visit({p + "attn_norm_2.bias", c.n_embd, 1, l.attn_norm_2 != nullptr, nullptr,
           &l.attn_norm_2_b});
    visit({p + "attn_qkv.weight", c.n_embd, q_dim + 2 * kv_dim, true, &l.wqkv, nullptr});
    if (l.wqkv.present()) {
      l.wq = l.wqkv.rows_range(0, q_dim);
      l.wk = l.wqkv.rows_range(q_dim, kv_dim);
      l.wv = l.wqkv.rows_range(q_dim + kv_dim, kv_dim);
    }
    visit({p + "attn_output.weight", q_dim, c.n_embd, true, &l.wo, nullptr});
    visit({p + "ffn_up.weight", c.n_embd, c.n_ff, true, &l.ffn_up, nullptr});
    visit({p + "ffn_down.weight", c.n_ff, c.n_embd, false, &l.ffn_down, nullptr});
    visit({p + "ffn_down_t.weight", c.n_embd, c.n_ff, false, &l.ffn_down_t, nullptr});
    visit({p + "fc1.weight", c.n_embd, kAnyDim, false, &l.fc1, nullptr});
    visit({p + "fc2.weight", l.fc1.present() ? l.fc1.rows : kAnyDim, c.n_ff, false, &l.fc2,
           nullptr});
  }
}

}  // namespace hearth
