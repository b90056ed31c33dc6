#include "model/config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/error.h"

namespace hearth {
namespace {

// Per-architecture facts that GGUF metadata does not carry: the block recipe and the defaults.
// Adding an architecture whose block the recipe can describe is adding a row here.
// `sparse_act` is the activation of the architecture's PowerInfer (PWRI) files, which carry no
// activation key: PowerInfer's sparse graph is ReLU-only (ReGLU for llama, dReLU for bamboo,
// relu(up) for falcon and opt). Dense falcon GGUFs (llama.cpp's converter) are GELU models.
// `n_ctx_train` is the default of {arch}.context_length (opt: its 2050 learned positions, of which
// the first two are an offset, HF's OPTLearnedPositionalEmbedding).
struct ArchTraits {
  std::string_view name;
  NormType norm;
  RopeType rope_type;
  FfnActivation default_act;
  FfnActivation sparse_act;
  bool up_relu;  // dReLU: relu(gate) * relu(up)
  int64_t n_ctx_train;
  BlockRecipe block;
  int64_t swa_pattern = 0;  // ModelConfig::swa_pattern
  float rope_freq_base_swa = 0.0f;  // ModelConfig::rope_freq_base_swa
};
// Qwen2: the Llama block with q/k/v biases and NeoX RoPE. Phi-3: fused QKV and fused gate|up,
// NeoX RoPE, often a sliding window ({arch}.attention.sliding_window, read for every arch).
// Falcon: attention and FFN side by side on one LayerNorm (Falcon-40B adds attn_norm_2, the
// attention's own), one fused QKV. OPT (Meta's pre-LayerNorm OPT-1.3B and larger): biases on
// every projection, learned absolute positions. Qwen3: the Llama block with an RMSNorm of every
// head's q and k before RoPE, NeoX RoPE, and heads wider than n_embd / n_head in some sizes.
// Gemma: the Llama block with embeddings scaled by sqrt(n_embd), NeoX RoPE, GELU-gated FFN, tied
// output. Gemma 2: Gemma's, plus a norm after each half as well as before it, soft-capped
// attention scores and logits, and a sliding window on every other layer. Gemma 3: Gemma 2's
// block with Qwen3's per-head q/k norms and no soft-caps; five sliding layers to one global, the
// sliding ones with RoPE base 10000 unscaled.
constexpr BlockRecipe kLlamaBlock{};
constexpr BlockRecipe kFalconBlock{.parallel = true, .norm_bias = true, .fused_qkv = true};
constexpr BlockRecipe kOptBlock{.norm_bias = true, .qkv_bias = true, .out_bias = true,
                                .ffn_bias = true, .learned_positions = true, .pos_offset = 2};
constexpr BlockRecipe kQwen2Block{.qkv_bias = true};
constexpr BlockRecipe kPhi3Block{.fused_qkv = true, .fused_gate_up = true};
constexpr BlockRecipe kQwen3Block{.qk_norm = true};
constexpr BlockRecipe kGemmaBlock{.scaled_embd = true};
constexpr BlockRecipe kGemma2Block{.post_norms = true, .scaled_embd = true};
constexpr BlockRecipe kGemma3Block{.qk_norm = true, .post_norms = true, .scaled_embd = true};
constexpr std::array<ArchTraits, 10> kArchs = {{
    {"llama", NormType::Rms, RopeType::Normal, FfnActivation::Silu, FfnActivation::Relu, false,
     2048, kLlamaBlock},
    {"bamboo", NormType::Rms, RopeType::Normal, FfnActivation::Relu, FfnActivation::Relu, true,
     2048, kLlamaBlock},
    {"falcon", NormType::Layer, RopeType::Neox, FfnActivation::Gelu, FfnActivation::Relu, false,
     2048, kFalconBlock},
    {"opt", NormType::Layer, RopeType::None, FfnActivation::Relu, FfnActivation::Relu, false, 2050,
     kOptBlock},
    {"qwen2", NormType::Rms, RopeType::Neox, FfnActivation::Silu, FfnActivation::Relu, false, 4096,
     kQwen2Block},
    {"phi3", NormType::Rms, RopeType::Neox, FfnActivation::Silu, FfnActivation::Relu, false, 4096,
     kPhi3Block},
    {"qwen3", NormType::Rms, RopeType::Neox, FfnActivation::Silu, FfnActivation::Relu, false,
     40960, kQwen3Block},
    {"gemma", NormType::Rms, RopeType::Neox, FfnActivation::Gelu, FfnActivation::Relu, false,
     8192, kGemmaBlock},
    {"gemma2", NormType::Rms, RopeType::Neox, FfnActivation::Gelu, FfnActivation::Relu, false,
     8192, kGemma2Block, 2},
    {"gemma3", NormType::Rms, RopeType::Neox, FfnActivation::Gelu, FfnActivation::Relu, false,
     131072, kGemma3Block, 6, 10000.0f},
}};

const ArchTraits* find_arch(std::string_view name) {
  for (const auto& t : kArchs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string supported_archs() {
  std::string s;
  for (const auto& t : kArchs) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& file, std::string_view arch) : file_(file), prefix_(arch) {}

  int64_t required_int(std::string_view suffix, int64_t min_value, int64_t max_value) const {
    const std::string key = prefix_ + "." + std::string(suffix);
    const auto v = file_.get_int(key);
    if (!v) fail(file_.path(), ": missing metadata key '", key, "'");
    return check_range(key, *v, min_value, max_value);
  }
  int64_t optional_int(std::string_view suffix, int64_t fallback, int64_t min_value,
                       int64_t max_value) const {
    const std::string key = prefix_ + "." + std::string(suffix);
    const auto v = file_.get_int(key);
    return v ? check_range(key, *v, min_value, max_value) : fallback;
  }
  double optional_float(std::string_view suffix, double fallback) const {
    const std::string key = prefix_ + "." + std::string(suffix);
    const auto v = file_.get_float(key);
    return v ? *v : fallback;
  }

 private:
  int64_t check_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi) {
      fail(file_.path(), ": metadata key '", key, "' = ", v, " is out of range [", lo, ", ", hi, "]");
    }
    return v;
  }
  const gguf::GgufFile& file_;
  std::string prefix_;
};

constexpr int64_t kMaxDim = int64_t{1} << 20;  // no real model has a hidden size near 1M

// Our key first; PowerInfer's (not arch-prefixed) for its files; default 0 (score >= 0, i.e. a
// predicted probability of at least one half).
float read_sparse_threshold(const gguf::GgufFile& file) {
  for (const char* key : {"hearth.sparse_threshold", "powerinfer.sparse_threshold"}) {
    if (const auto v = file.get_float(key)) {
      if (!std::isfinite(*v)) fail(file.path(), ": metadata key '", key, "' is not finite");
      return static_cast<float>(*v);
    }
  }
  return 0.0f;
}

// A calibrated per-layer array: one finite value per layer (magnitude thresholds also >= 0).
std::vector<float> read_layer_array(const gguf::GgufFile& file, const char* key, int64_t n_layer,
                                    bool non_negative) {
  auto v = file.get_float_array(key);
  if (!v) return {};
  if (static_cast<int64_t>(v->size()) != n_layer) {
    fail(file.path(), ": metadata key '", key, "' has ", v->size(), " values for ", n_layer,
         " layers");
  }
  for (const float x : *v) {
    if (!std::isfinite(x) || (non_negative && x < 0)) {
      fail(file.path(), ": metadata key '", key, "' holds an invalid threshold (", x, ")");
    }
  }
  return std::move(*v);
}

// Every layer's thresholds from whichever of kThresholdKeys the file has (the others 0); empty
// when it has none.
std::vector<LayerThresholds> read_thresholds(const gguf::GgufFile& file, int64_t n_layer) {
  std::vector<LayerThresholds> t;
  for (const ThresholdKey& k : kThresholdKeys) {
    const std::vector<float> v = read_layer_array(file, k.key, n_layer, true);
    if (v.empty()) continue;
    t.resize(static_cast<size_t>(n_layer));
    for (size_t il = 0; il < v.size(); ++il) t[il].*k.field = v[il];
  }
  return t;
}

// The calibrated input shares of a model-wide file (ModelConfig::input_shares): kInputKinds per
// layer, each in [0, 1].
std::vector<float> read_input_shares(const gguf::GgufFile& file, int64_t n_layer) {
  constexpr const char* kKey = "hearth.calibration.input_shares";
  auto v = file.get_float_array(kKey);
  if (!v) return {};
  if (static_cast<int64_t>(v->size()) != kInputKinds * n_layer) {
    fail(file.path(), ": metadata key '", kKey, "' has ", v->size(), " values for ", n_layer,
         " layers (", kInputKinds, " per layer)");
  }
  for (const float x : *v) {
    if (!(x >= 0.0f && x <= 1.0f)) {
      fail(file.path(), ": metadata key '", kKey, "' holds a share outside [0, 1] (", x, ")");
    }
  }
  return std::move(*v);
}

// Fused QKV rows: llama.cpp's (and PowerInfer's) converters reorder Falcon's so all Q heads come
// first, then K, then V ("jploski"); that is the only layout Hearth reads.
void check_qkv_layout(const gguf::GgufFile& file, const std::string& arch) {
  const std::string key = arch + ".tensor_data_layout";
  const auto layout = file.get_string(key);
  if (layout && *layout != "jploski") {
    fail(file.path(), ": metadata key '", key, "' = '", *layout,
         "' is not supported (Hearth reads the 'jploski' layout: all Q heads, then K, then V)");
  }
}

// rope.scaling.*: linear (or the older rope.scale_linear) divides positions by the factor; YaRN
// mixes that with unscaled angles (ops/rope.h); attn_factor scales cos and sin for any type.
void read_rope_scaling(const gguf::GgufFile& file, const KeyReader& keys, ModelConfig& c) {
  const std::string where = file.path() + ": " + c.arch + ".rope.scaling.";
  const auto type = file.get_string(c.arch + ".rope.scaling.type");
  if (type && *type != "none" && *type != "linear" && *type != "yarn") {
    fail(where, "type '", *type, "' is not supported (Hearth reads none, linear and yarn)");
  }
  // As llama.cpp: the factor applies with no type given (linear), from the older key if need be.
  double factor =
      keys.optional_float("rope.scaling.factor", keys.optional_float("rope.scale_linear", 1.0));
  if ((type && *type == "none") || factor == 0.0) factor = 1.0;  // 0: unset, as llama.cpp
  if (!(factor > 0) || !std::isfinite(factor)) {
    fail(where, "factor must be positive (got ", factor, ")");
  }
  c.rope_freq_scale = static_cast<float>(1.0 / factor);
  c.rope_n_ctx_orig =
      keys.optional_int("rope.scaling.original_context_length", c.n_ctx_train, 1, int64_t{1} << 24);
  c.rope_attn_factor = static_cast<float>(keys.optional_float("rope.scaling.attn_factor", 1.0));
  if (!(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor)) {
    fail(where, "attn_factor must be positive (got ", c.rope_attn_factor, ")");
  }
  if (!type || *type != "yarn") return;
  c.rope_ext_factor = 1.0f;
  c.rope_yarn_beta_fast =
      static_cast<float>(keys.optional_float("rope.scaling.yarn_beta_fast", 32.0));
  c.rope_yarn_beta_slow =
      static_cast<float>(keys.optional_float("rope.scaling.yarn_beta_slow", 1.0));
  if (!(c.rope_yarn_beta_fast > 0) || !(c.rope_yarn_beta_slow > 0)) {
    fail(where, "yarn_beta_fast and yarn_beta_slow must be positive");
  }
  // DeepSeek's variant rescales the attention by a log multiplier, which Hearth does not do.
  if (keys.optional_float("rope.scaling.yarn_log_multiplier", 0.0) != 0.0) {
    fail(where, "yarn_log_multiplier is not supported");
  }
}

// A head's width: attention.key_length where the file has it (Qwen3 and others make heads wider
// or narrower than n_embd / n_head), else n_embd / n_head. Hearth's attention gives keys and
// values one width.
int64_t read_head_dim(const gguf::GgufFile& file, const KeyReader& keys, const ModelConfig& c) {
  const int64_t fallback = c.n_embd % c.n_head == 0 ? c.n_embd / c.n_head : 0;
  const int64_t head_dim = keys.optional_int("attention.key_length", fallback, 0, 4096);
  if (head_dim == 0) {
    fail(file.path(), ": embedding_length ", c.n_embd, " is not divisible by head_count ", c.n_head,
         " and the file has no ", c.arch, ".attention.key_length");
  }
  const int64_t value_length = keys.optional_int("attention.value_length", head_dim, 1, 4096);
  if (value_length != head_dim) {
    fail(file.path(), ": ", c.arch, ".attention.value_length ", value_length,
         " differs from key_length ", head_dim, ", which Hearth does not support");
  }
  return head_dim;
}

// A soft-cap key ({arch}.attn_logit_softcapping, final_logit_softcapping): 0 when absent.
float read_softcap(const gguf::GgufFile& file, const KeyReader& keys, const ModelConfig& c,
                   const char* suffix) {
  const double cap = keys.optional_float(suffix, 0.0);
  if (!std::isfinite(cap) || cap < 0) {
    fail(file.path(), ": ", c.arch, ".", suffix, " = ", cap, " must be a non-negative number");
  }
  return static_cast<float>(cap);
}

// Gemma 2 and 3 scale q by 1 / sqrt(query_pre_attn_scalar), which their GGUF files do not carry:
// as llama.cpp, n_embd / n_head for the 27B models (46 and 62 layers) and head_dim (the default)
// for the others.
float attention_scale(const ModelConfig& c) {
  if ((c.arch == "gemma2" && c.n_layer == 46) || (c.arch == "gemma3" && c.n_layer == 62)) {
    return 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  }
  return 0.0f;
}

}  // namespace

FfnActivation parse_ffn_activation(std::string_view name, const std::string& where) {
  // The GLU names some converters write stand for their gate activation.
  if (name == "swiglu") name = "silu";
  if (name == "reglu") name = "relu";
  if (name == "geglu") name = "gelu";
  if (const auto act = parse_activation(name)) return from_activation(*act);
  fail(where, ": unknown FFN activation '", name, "' (expected silu, relu, relu2 or gelu)");
}

ModelConfig read_config(const gguf::GgufFile& file) {
  ModelConfig c;
  const auto arch = file.get_string("general.architecture");
  if (!arch) fail(file.path(), ": missing metadata key 'general.architecture'");
  c.arch = std::string(*arch);
  const ArchTraits* traits = find_arch(c.arch);
  if (!traits) {
    fail(file.path(), ": unsupported architecture '", c.arch, "' (supported: ", supported_archs(),
         ")");
  }
  if (auto name = file.get_string("general.name")) c.name = std::string(*name);

  const KeyReader keys(file, c.arch);
  c.n_embd = keys.required_int("embedding_length", 1, kMaxDim);
  c.n_layer = keys.required_int("block_count", 1, 4096);
  c.n_ff = keys.required_int("feed_forward_length", 1, 16 * kMaxDim);
  c.n_head = keys.required_int("attention.head_count", 1, c.n_embd);
  c.n_head_kv = keys.optional_int("attention.head_count_kv", c.n_head, 1, c.n_head);
  c.n_ctx_train = keys.optional_int("context_length", traits->n_ctx_train, 1, int64_t{1} << 24);
  if (c.n_head % c.n_head_kv != 0) {
    fail(file.path(), ": head_count ", c.n_head, " is not divisible by head_count_kv ", c.n_head_kv);
  }
  c.head_dim = read_head_dim(file, keys, c);
  c.n_rot = keys.optional_int("rope.dimension_count", c.head_dim, 2, c.head_dim);
  if (c.n_rot % 2 != 0) fail(file.path(), ": rope.dimension_count ", c.n_rot, " is odd");
  c.norm = traits->norm;
  const char* eps_key = c.norm == NormType::Rms ? "attention.layer_norm_rms_epsilon"
                                                : "attention.layer_norm_epsilon";
  c.norm_eps = static_cast<float>(keys.optional_float(eps_key, 1e-5));
  c.rope_freq_base = static_cast<float>(keys.optional_float("rope.freq_base", 10000.0));
  if (!(c.norm_eps > 0) || !(c.rope_freq_base > 0)) {
    fail(file.path(), ": ", c.arch, ".", eps_key, " and ", c.arch,
         ".rope.freq_base must be positive");
  }
  c.rope_type = traits->rope_type;
  read_rope_scaling(file, keys, c);
  c.n_swa = keys.optional_int("attention.sliding_window", 0, 0, int64_t{1} << 24);
  c.swa_pattern = traits->swa_pattern;
  c.rope_freq_base_swa = traits->rope_freq_base_swa;
  c.attn_scale = attention_scale(c);
  c.attn_softcap = read_softcap(file, keys, c, "attn_logit_softcapping");
  c.final_softcap = read_softcap(file, keys, c, "final_logit_softcapping");
  c.block = traits->block;
  if (c.block.fused_qkv) check_qkv_layout(file, c.arch);
  c.ffn_act = file.is_powerinfer() ? traits->sparse_act : traits->default_act;
  c.ffn_up_relu = traits->up_relu;
  if (auto act = file.get_string("hearth.ffn_activation")) {
    c.ffn_act = parse_ffn_activation(*act, file.path() + ": metadata key 'hearth.ffn_activation'");
  }
  c.sparse_threshold = read_sparse_threshold(file);
  c.predictor_thresholds = read_layer_array(file, "hearth.predictor_thresholds", c.n_layer, false);
  c.thresholds = read_thresholds(file, c.n_layer);
  c.input_shares = read_input_shares(file, c.n_layer);
  // n_vocab, ffn_gated and tied_output come from the tensors (bind_weights).
  return c;
}

std::string to_string(FfnActivation a) { return std::string(activation_name(to_activation(a))); }

std::string to_string(RopeType r) {
  switch (r) {
    case RopeType::None: return "none";
    case RopeType::Normal: return "normal";
    case RopeType::Neox: return "neox";
  }
  return "normal";
}

std::string to_string(NormType n) { return n == NormType::Rms ? "rms" : "layer"; }

}  // namespace hearth

namespace hearth {

SparseMode parse_sparse_mode(std::string_view name) {
  if (name == "dense") return SparseMode::Dense;
  if (name == "oracle") return SparseMode::Oracle;
  if (name == "predictor") return SparseMode::Predictor;
  if (name == "threshold") return SparseMode::Threshold;
  if (name == "auto") return SparseMode::Auto;
  fail("unknown sparse mode '", name, "' (expected dense, oracle, predictor, threshold or auto)");
}

std::string to_string(SparseMode m) {
  switch (m) {
    case SparseMode::Dense: return "dense";
    case SparseMode::Oracle: return "oracle";
    case SparseMode::Predictor: return "predictor";
    case SparseMode::Threshold: return "threshold";
    case SparseMode::Auto: return "auto";
  }
  return "dense";
}

bool model_wide(const std::vector<LayerThresholds>& thresholds) {
  return std::any_of(thresholds.begin(), thresholds.end(), [](const LayerThresholds& t) {
    return t.attn_in > 0 || t.attn_out > 0 || t.ffn_in > 0;
  });
}

}  // namespace hearth
