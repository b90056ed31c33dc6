// The OPT block (PowerInfer's "opt", as Meta's pre-LayerNorm OPT-1.3B and larger): learned
// absolute position embeddings added to the token embeddings, LayerNorm with bias before attention
// and before the FFN, biases on every projection, an ungated ReLU FFN, and the output projection
// tied to the token embeddings. Position p reads row p + 2 of position_embd (HF's
// OPTLearnedPositionalEmbedding offset; the table has 2050 rows for 2048 positions).
// PowerInfer's files store down transposed (ffn_down_t, with ffn_down_t.bias) and add predictors.
#include "model/weights.h"

namespace hearth {

void visit_opt_weights(const ModelConfig& c, Weights& w, const WeightVisitor& visit) {
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_embd_kv();
  w.pos_offset = 2;
  visit({"token_embd.weight", c.n_embd, c.n_vocab, true, &w.token_embd, nullptr});
  visit({"position_embd.weight", c.n_embd, kAnyDim, true, &w.pos_embd, nullptr});
  visit({"output_norm.weight", c.n_embd, 1, true, nullptr, &w.output_norm});
  visit({"output_norm.bias", c.n_embd, 1, true, nullptr, &w.output_norm_b});
  visit({"output.weight", c.n_embd, c.n_vocab, false, &w.output, nullptr});
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    visit({p + "attn_norm.weight", c.n_embd, 1, true, nullptr, &l.attn_norm});
    visit({p + "attn_norm.bias", c.n_embd, 1, true, nullptr, &l.attn_norm_b});
    visit({p + "attn_q.weight", c.n_embd, q_dim, true, &l.wq, nullptr});
    visit({p + "attn_q.bias", q_dim, 1, true, nullptr, &l.bq});
    visit({p + "attn_k.weight", c.n_embd, kv_dim, true, &l.wk, nullptr});
    visit({p + "attn_k.bias", kv_dim, 1, true, nullptr, &l.bk});
    visit({p + "attn_v.weight", c.n_embd, kv_dim, true, &l.wv, nullptr});
    visit({p + "attn_v.bias", kv_dim, 1, true, nullptr, &l.bv});
    visit({p + "attn_output.weight", q_dim, c.n_embd, true, &l.wo, nullptr});
    visit({p + "attn_output.bias", c.n_embd, 1, true, nullptr, &l.bo});
    visit({p + "ffn_norm.weight", c.n_embd, 1, true, nullptr, &l.ffn_norm});
    visit({p + "ffn_norm.bias", c.n_embd, 1, true, nullptr, &l.ffn_norm_b});
    visit({p + "ffn_up.weight", c.n_embd, c.n_ff, true, &l.ffn_up, nullptr});
    visit({p + "ffn_up.bias", c.n_ff, 1, true, nullptr, &l.ffn_up_b});
    // The down bias is named after whichever layout the file has (ffn_down_t.bias in PowerInfer's
    // files); bind_weights requires exactly one layout.
    visit({p + "ffn_down.weight", c.n_ff, c.n_embd, false, &l.ffn_down, nullptr});
    visit({p + "ffn_down_t.weight", c.n_embd, c.n_ff, false, &l.ffn_down_t, nullptr});
    if (l.ffn_down.present()) {
      visit({p + "ffn_down.bias", c.n_embd, 1, true, nullptr, &l.ffn_down_b});
    } else if (l.ffn_down_t.present()) {
      visit({p + "ffn_down_t.bias", c.n_embd, 1, true, nullptr, &l.ffn_down_b});
    }
    visit({p + "fc1.weight", c.n_embd, kAnyDim, false, &l.fc1, nullptr});
    visit({p + "fc2.weight", l.fc1.present() ? l.fc1.rows : kAnyDim, c.n_ff, false, &l.fc2,
           nullptr});
  }
}

}  // namespace hearth
