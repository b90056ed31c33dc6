// Plain value types shared by the public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth {

// FFN nonlinearity. Gated variants (silu, relu, relu2, gelu applied to the gate, times up) are
// used when the model has ffn_gate; otherwise the activation applies to up directly.
enum class FfnActivation { Silu, Relu, Relu2, Gelu };

// Rotary embedding: adjacent pairs (llama), halves (neox: falcon), or none (opt: learned
// absolute positions).
enum class RopeType { None, Normal, Neox };

enum class NormType { Rms, Layer };  // RMSNorm (llama) or LayerNorm with bias (falcon, opt)

// Element type of the KV cache.
enum class KvType { F32, F16 };

// Which FFN neurons a session computes (--sparse): all (Dense); those whose gate activation is
// non-zero (Oracle: exact for ReLU models); those the per-layer predictors (fc1 -> relu -> fc2 >=
// threshold) pick (Predictor); those whose gate activation's magnitude exceeds the layer's
// calibrated thresholds (Threshold: SwiGLU models, `hearth calibrate --sparsity`); Auto: Predictor
// when the model has predictors, else Threshold when it has thresholds, else Dense.
enum class SparseMode { Dense, Oracle, Predictor, Threshold, Auto };

// "dense", "oracle", "predictor", "threshold", "auto"; throws hearth::Error on anything else.
SparseMode parse_sparse_mode(std::string_view name);
std::string to_string(SparseMode m);

// How an architecture's transformer block is put together, beyond the hyper-parameters of
// ModelConfig (norm, rope_type, ffn_act, ffn_gated, ffn_up_relu): one forward pass runs any
// recipe, and one weight list binds any recipe's tensors (llama.cpp's names).
//   sequential: x += attn(norm(x; attn_norm));  x += ffn(norm(x; ffn_norm))
//   parallel:   x += attn(norm(x; attn_norm_2, else attn_norm)) + ffn(norm(x; attn_norm))
struct BlockRecipe {
  bool parallel = false;           // attention and FFN read the same input (falcon); no ffn_norm
  bool norm_bias = false;          // every norm has a .bias (LayerNorm models)
  bool fused_qkv = false;          // one attn_qkv: all Q rows, then K, then V
  bool qkv_bias = false;           // attn_q/k/v.bias (or attn_qkv.bias)
  bool qk_norm = false;            // attn_q_norm / attn_k_norm: RMSNorm of every head's q and k
  bool fused_gate_up = false;      // ffn_up holds the gate's rows, then up's (phi3)
  bool out_bias = false;           // attn_output.bias
  bool ffn_bias = false;           // ffn_up.bias and ffn_down.bias (ffn_down_t.bias)
  bool post_norms = false;         // post_attention_norm / post_ffw_norm on each half's output
  bool scaled_embd = false;        // token embeddings times sqrt(n_embd) (gemma)
  bool learned_positions = false;  // position_embd added to the embeddings (no RoPE)
  int64_t pos_offset = 0;          // position p reads row p + pos_offset of position_embd
};

// SparseMode::Threshold on one layer: an element of a projection's input whose magnitude is at or
// below that input's threshold is skipped, and with it the weights it would multiply (0: none is).
// Model-wide files (`hearth calibrate --sparsity`) set attn_in, attn_out, ffn_in and down; FFN-only
// ones (`--scope ffn`) set gate and down.
struct LayerThresholds {
  float attn_in = 0.0f;   // q, k and v's input: the normed residual
  float attn_out = 0.0f;  // wo's input: the attention's output
  float ffn_in = 0.0f;    // gate and up's input: the normed residual
  float gate = 0.0f;      // |act(gate)|: the neuron's up and down rows are skipped too
  float down = 0.0f;      // down's input |act(gate) · up|
};

// The inputs a model-wide file thresholds in each layer, in the order of its per-layer arrays
// (ModelConfig::input_shares, calibration's statistics): q, k and v's, wo's, gate and up's, and
// down's.
enum InputKind : int { kAttnIn, kAttnOut, kFfnIn, kDownIn, kInputKinds };

// Hyper-parameters of a loaded model, read from GGUF metadata.
struct ModelConfig {
  std::string arch;  // general.architecture
  std::string name;  // general.name, if any
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;     // {arch}.attention.key_length, else n_embd / n_head
  int64_t n_rot = 0;        // rotary dimensions per head (<= head_dim)
  int64_t n_ctx_train = 0;  // opt: the positions it has learned embeddings for
  NormType norm = NormType::Rms;
  float norm_eps = 1e-5f;  // layer_norm_rms_epsilon or layer_norm_epsilon, per `norm`
  float rope_freq_base = 10000.0f;
  RopeType rope_type = RopeType::Normal;
  int64_t n_swa = 0;  // sliding-window attention: each token sees its last n_swa positions; 0: all
  // Layers that slide: every one (0), or those with il % swa_pattern < swa_pattern - 1 (gemma2:
  // 2, the even layers; the others see the whole context).
  int64_t swa_pattern = 0;
  // The sliding layers' RoPE base, unscaled (gemma3: their 10000 against the others' 1e6 with
  // linear scaling); 0: every layer's RoPE is the model's.
  float rope_freq_base_swa = 0.0f;
  float attn_scale = 0.0f;       // of q · k; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;     // scores s become c · tanh(s / c) before the softmax; 0: none
  float final_softcap = 0.0f;    // the same on the logits
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor with linear or YaRN scaling, else 1
  // [n_rot/2] per-frequency divisors from the rope_freqs tensor (Llama 3.1+), or empty.
  std::vector<float> rope_freq_factors;
  // YaRN (rope.scaling.type yarn): the mix of extrapolated and interpolated angles (1 with
  // YaRN, 0 otherwise) and its ramp's bounds, in turns over the original context.
  float rope_ext_factor = 0.0f;
  float rope_yarn_beta_fast = 32.0f, rope_yarn_beta_slow = 1.0f;
  int64_t rope_n_ctx_orig = 0;    // rope.scaling.original_context_length, else n_ctx_train
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: scales RoPE's cos and sin
  // Phi-3's LongRoPE: [n_rot/2] frequency divisors for contexts longer than rope_n_ctx_orig
  // (long) and the others (short), from the rope_factors_long/short tensors, or empty.
  std::vector<float> rope_factors_long, rope_factors_short;
  FfnActivation ffn_act = FfnActivation::Silu;
  bool ffn_gated = true;     // has ffn_gate
  bool ffn_up_relu = false;  // dReLU (bamboo): the activation applies to up as well as to the gate
  float sparse_threshold = 0.0f;  // predictor threshold stored in the file
  // Per-layer predictor score thresholds (hearth.predictor_thresholds, from calibration); empty:
  // sparse_threshold for every layer.
  std::vector<float> predictor_thresholds;
  // Per-layer magnitude thresholds of SparseMode::Threshold (hearth.*_thresholds, from
  // calibration); empty when the file has none.
  std::vector<LayerThresholds> thresholds;
  // Model-wide files: per layer, the share of the elements of each InputKind that the thresholds
  // skipped on the calibration text (hearth.calibration.input_shares, [n_layer * kInputKinds]);
  // empty when the file has none.
  std::vector<float> input_shares;
  bool tied_output = false;  // output projection reuses token_embd
  BlockRecipe block;         // from the architecture table

  int64_t n_embd_kv() const { return n_head_kv * head_dim; }
  // Whether layer il's attention slides (sees the last n_swa positions only).
  bool sliding_layer(int64_t il) const {
    return n_swa > 0 && (swa_pattern == 0 || il % swa_pattern < swa_pattern - 1);
  }
  // The window of layer il's attention (0: the whole context).
  int64_t layer_window(int64_t il) const { return sliding_layer(il) ? n_swa : 0; }
};

std::string to_string(FfnActivation a);
std::string to_string(RopeType r);
std::string to_string(NormType n);

}  // namespace hearth
