// The Llama block: RMSNorm, GQA attention with RoPE, gated (or plain) FFN. Mistral, TinyLlama and
// llama2.c exports use this same list under general.architecture = "llama", as do PowerInfer's
// llama and bamboo files, which add predictors and store ffn_down transposed (ffn_down_t).
#include "model/weights.h"

namespace hearth {

void visit_llama_weights(const ModelConfig& c, Weights& w, const WeightVisitor& visit) {
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_embd_kv();
  visit({"token_embd.weight", c.n_embd, c.n_vocab, true, &w.token_embd, nullptr});
  visit({"output_norm.weight", c.n_embd, 1, true, nullptr, &w.output_norm});
  visit({"output.weight", c.n_embd, c.n_vocab, false, &w.output, nullptr});
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    visit({p + "attn_norm.weight", c.n_embd, 1, true, nullptr, &l.attn_norm});
    visit({p + "attn_q.weight", c.n_embd, q_dim, true, &l.wq, nullptr});
    visit({p + "attn_k.weight", c.n_embd, kv_dim, true, &l.wk, nullptr});
    visit({p + "attn_v.weight", c.n_embd, kv_dim, true, &l.wv, nullptr});
    visit({p + "attn_output.weight", q_dim, c.n_embd, true, &l.wo, nullptr});
    visit({p + "ffn_norm.weight", c.n_embd, 1, true, nullptr, &l.ffn_norm});
    visit({p + "ffn_gate.weight", c.n_embd, c.n_ff, false, &l.ffn_gate, nullptr});
    visit({p + "ffn_up.weight", c.n_embd, c.n_ff, true, &l.ffn_up, nullptr});
    visit({p + "ffn_down.weight", c.n_ff, c.n_embd, false, &l.ffn_down, nullptr});
    visit({p + "ffn_down_t.weight", c.n_embd, c.n_ff, false, &l.ffn_down_t, nullptr});
    visit({p + "fc1.weight", c.n_embd, kAnyDim, false, &l.fc1, nullptr});
    // fc2's input width is whatever fc1 turned out to have (0 when there is no fc1: then fc2 must
    // be absent too, which bind_weights checks).
    visit({p + "fc2.weight", l.fc1.present() ? l.fc1.rows : kAnyDim, c.n_ff, false, &l.fc2,
           nullptr});
  }
}

}  // namespace hearth
