// The one weight list: every tensor a block recipe (ModelConfig::block) names, in llama.cpp's
// tensor names. PowerInfer's files add predictors (fc1, fc2) and may store ffn_down transposed
// (ffn_down_t, whose bias is then ffn_down_t.bias).
#include "model/weights.h"

namespace hearth {
namespace {

// A norm's weight, and its bias where the recipe's norms have one.
void visit_norm(const BlockRecipe& b, const std::string& name, int64_t n_embd, bool required,
                const float** weight, const float** bias, const WeightVisitor& visit) {
  visit({name + ".weight", n_embd, 1, required, nullptr, weight});
  if (b.norm_bias) visit({name + ".bias", n_embd, 1, *weight != nullptr, nullptr, bias});
}

void visit_attention(const ModelConfig& c, const std::string& p, LayerWeights& l,
                     const WeightVisitor& visit) {
  const BlockRecipe& b = c.block;
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_embd_kv();
  if (b.fused_qkv) {
    visit({p + "attn_qkv.weight", c.n_embd, q_dim + 2 * kv_dim, true, &l.wqkv, nullptr});
    if (b.qkv_bias) visit({p + "attn_qkv.bias", q_dim + 2 * kv_dim, 1, true, nullptr, &l.bqkv});
    if (l.wqkv.present()) {
      l.wq = l.wqkv.rows_range(0, q_dim);
      l.wk = l.wqkv.rows_range(q_dim, kv_dim);
      l.wv = l.wqkv.rows_range(q_dim + kv_dim, kv_dim);
    }
    if (l.bqkv) {
      l.bq = l.bqkv;
      l.bk = l.bqkv + q_dim;
      l.bv = l.bqkv + q_dim + kv_dim;
    }
  } else {
    const struct {
      const char* name;
      int64_t rows;
      Matrix* m;
      const float** bias;
    } parts[] = {{"attn_q", q_dim, &l.wq, &l.bq},
                 {"attn_k", kv_dim, &l.wk, &l.bk},
                 {"attn_v", kv_dim, &l.wv, &l.bv}};
    for (const auto& part : parts) {
      visit({p + part.name + ".weight", c.n_embd, part.rows, true, part.m, nullptr});
      if (b.qkv_bias) visit({p + part.name + ".bias", part.rows, 1, true, nullptr, part.bias});
    }
  }
  if (b.qk_norm) {
    visit({p + "attn_q_norm.weight", c.head_dim, 1, true, nullptr, &l.attn_q_norm});
    visit({p + "attn_k_norm.weight", c.head_dim, 1, true, nullptr, &l.attn_k_norm});
  }
  visit({p + "attn_output.weight", q_dim, c.n_embd, true, &l.wo, nullptr});
  if (b.out_bias) visit({p + "attn_output.bias", c.n_embd, 1, true, nullptr, &l.bo});
  if (b.post_norms) {
    visit({p + "post_attention_norm.weight", c.n_embd, 1, true, nullptr, &l.attn_post_norm});
  }
}

void visit_ffn(const ModelConfig& c, const std::string& p, LayerWeights& l,
               const WeightVisitor& visit) {
  const BlockRecipe& b = c.block;
  if (b.fused_gate_up) {
    visit({p + "ffn_up.weight", c.n_embd, 2 * c.n_ff, true, &l.ffn_gate_up, nullptr});
    if (l.ffn_gate_up.present()) {
      l.ffn_gate = l.ffn_gate_up.rows_range(0, c.n_ff);
      l.ffn_up = l.ffn_gate_up.rows_range(c.n_ff, c.n_ff);
    }
  } else {
    visit({p + "ffn_gate.weight", c.n_embd, c.n_ff, false, &l.ffn_gate, nullptr});
    visit({p + "ffn_up.weight", c.n_embd, c.n_ff, true, &l.ffn_up, nullptr});
  }
  if (b.ffn_bias) visit({p + "ffn_up.bias", c.n_ff, 1, true, nullptr, &l.ffn_up_b});
  // bind_weights requires at least one layout of down; the bias is named after the one there is.
  visit({p + "ffn_down.weight", c.n_ff, c.n_embd, false, &l.ffn_down, nullptr});
  visit({p + "ffn_down_t.weight", c.n_embd, c.n_ff, false, &l.ffn_down_t, nullptr});
  if (b.ffn_bias && (l.ffn_down.present() || l.ffn_down_t.present())) {
    const char* down = l.ffn_down.present() ? "ffn_down.bias" : "ffn_down_t.bias";
    visit({p + down, c.n_embd, 1, true, nullptr, &l.ffn_down_b});
  }
  if (b.post_norms) {
    visit({p + "post_ffw_norm.weight", c.n_embd, 1, true, nullptr, &l.ffn_post_norm});
  }
  visit({p + "fc1.weight", c.n_embd, kAnyDim, false, &l.fc1, nullptr});
  // fc2's input width is whatever fc1 turned out to have (any when there is no fc1: then fc2
  // must be absent too, which bind_weights checks).
  visit({p + "fc2.weight", l.fc1.present() ? l.fc1.rows : kAnyDim, c.n_ff, false, &l.fc2,
         nullptr});
}

}  // namespace

void visit_weights(const ModelConfig& c, Weights& w, const WeightVisitor& visit) {
  const BlockRecipe& b = c.block;
  visit({"token_embd.weight", c.n_embd, c.n_vocab, true, &w.token_embd, nullptr});
  if (b.learned_positions) {
    visit({"position_embd.weight", c.n_embd, kAnyDim, true, &w.pos_embd, nullptr});
  }
  visit_norm(b, "output_norm", c.n_embd, true, &w.output_norm, &w.output_norm_b, visit);
  visit({"output.weight", c.n_embd, c.n_vocab, false, &w.output, nullptr});
  if (!b.learned_positions) {
    visit({"rope_freqs.weight", c.n_rot / 2, 1, false, nullptr, &w.rope_freqs});
    visit({"rope_factors_long.weight", c.n_rot / 2, 1, false, nullptr, &w.rope_factors_long});
    visit({"rope_factors_short.weight", c.n_rot / 2, 1, false, nullptr, &w.rope_factors_short});
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    visit_norm(b, p + "attn_norm", c.n_embd, true, &l.attn_norm, &l.attn_norm_b, visit);
    if (b.parallel) {
      visit_norm(b, p + "attn_norm_2", c.n_embd, false, &l.attn_norm_2, &l.attn_norm_2_b, visit);
    }
    visit_attention(c, p, l, visit);
    if (!b.parallel) {
      visit_norm(b, p + "ffn_norm", c.n_embd, true, &l.ffn_norm, &l.ffn_norm_b, visit);
    }
    visit_ffn(c, p, l, visit);
  }
}

}  // namespace hearth
