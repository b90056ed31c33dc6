#include "model/weights.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "model/config.h"

namespace hearth {
namespace {

std::string dim_str(int64_t d) { return d == kAnyDim ? std::string("any") : std::to_string(d); }
std::string shape_str(int64_t ne0, int64_t ne1) {
  return ne1 == 1 ? str_cat("[", dim_str(ne0), "]")
                  : str_cat("[", dim_str(ne0), ", ", dim_str(ne1), "]");
}

void check_layers(const std::string& path, const std::vector<LayerWeights>& layers) {
  const bool predictors = layers.front().has_predictor();
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    if (!l.ffn_down.present() && !l.ffn_down_t.present()) {
      fail(path, ": missing tensor 'blk.", i, ".ffn_down.weight' (or its transpose 'blk.", i,
           ".ffn_down_t.weight')");
    }
    if (l.fc1.present() != l.fc2.present() || l.has_predictor() != predictors) {
      fail(path, ": the predictor tensors 'blk.N.fc1.weight' and 'blk.N.fc2.weight' must be in "
           "every layer or in none (layer ", i, " differs)");
    }
  }
}

// Norm weights are used as f32 directly; other float types are widened once at load.
const float* bind_vector(const gguf::TensorInfo& t, Weights& w) {
  const int64_t n = t.ne[0];
  switch (static_cast<DType>(t.type)) {
    case DType::F32:
      return reinterpret_cast<const float*>(t.data);
    case DType::F16:
    case DType::BF16: {
      const bool is_f16 = static_cast<DType>(t.type) == DType::F16;
      auto& v = w.owned.emplace_back(static_cast<size_t>(n));
      const auto* src = reinterpret_cast<const uint16_t*>(t.data);
      for (int64_t i = 0; i < n; ++i) v[i] = is_f16 ? fp16_to_fp32(src[i]) : bf16_to_fp32(src[i]);
      return v.data();
    }
    default:
      return nullptr;
  }
}

// A RoPE divisor tensor [n_rot/2] (name.weight), copied into the config where the file has it.
void read_rope_divisors(const std::string& path, const char* name, const float* tensor,
                        int64_t n_rot, std::vector<float>& out) {
  if (!tensor) return;
  out.assign(tensor, tensor + n_rot / 2);
  for (const float f : out) {
    if (!(f > 0) || !std::isfinite(f)) {
      fail(path, ": tensor '", name, ".weight' holds ", f,
           "; RoPE frequency divisors must be positive and finite");
    }
  }
}

// Learned positions: the context the model can see is the table's rows past the offset.
void check_positions(const std::string& path, const Weights& w, ModelConfig& config) {
  if (!w.pos_embd.present()) return;
  const int64_t offset = config.block.pos_offset;
  const int64_t n_pos = w.pos_embd.rows - offset;
  if (n_pos < 1) {
    fail(path, ": tensor 'position_embd.weight' has ", w.pos_embd.rows,
         " rows; it needs more than the position offset ", offset);
  }
  config.n_ctx_train = std::min(config.n_ctx_train, n_pos);
}

}  // namespace

Weights bind_weights(const gguf::GgufFile& file, ModelConfig& config) {
  // The vocabulary size is whatever the embedding table holds.
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd) fail(file.path(), ": missing tensor 'token_embd.weight'");
  config.n_vocab = embd->ne[1];

  Weights w;
  visit_weights(config, w, [&](const WeightSpec& spec) {
    const gguf::TensorInfo* t = file.find_tensor(spec.name);
    if (!t) {
      if (spec.required) fail(file.path(), ": missing tensor '", spec.name, "'");
      return;
    }
    const int64_t ne1 = t->n_dims >= 2 ? t->ne[1] : 1;
    const bool ne0_ok = spec.ne0 == kAnyDim || t->ne[0] == spec.ne0;
    const bool ne1_ok = spec.ne1 == kAnyDim || ne1 == spec.ne1;
    if (!ne0_ok || !ne1_ok || t->ne[2] != 1 || t->ne[3] != 1) {
      fail(file.path(), ": tensor '", spec.name, "' has shape ", shape_str(t->ne[0], ne1),
           ", expected ", shape_str(spec.ne0, spec.ne1));
    }
    if (!is_supported_dtype(t->type)) {
      const auto info = ggml_type_info(t->type);
      fail(file.path(), ": tensor '", spec.name, "' has type ",
           info ? std::string(info->name) : std::to_string(t->type),
           ", which Hearth does not support (supported: ", supported_dtype_names(), ")");
    }
    if (spec.vector) {
      *spec.vector = bind_vector(*t, w);
      if (!*spec.vector) {
        fail(file.path(), ": tensor '", spec.name, "' must be f32, f16 or bf16 (it is a norm vector)");
      }
      return;
    }
    *spec.matrix = Matrix{static_cast<DType>(t->type), t->data, ne1, t->ne[0]};
  });

  check_layers(file.path(), w.layers);
  read_rope_divisors(file.path(), "rope_freqs", w.rope_freqs, config.n_rot,
                     config.rope_freq_factors);
  read_rope_divisors(file.path(), "rope_factors_long", w.rope_factors_long, config.n_rot,
                     config.rope_factors_long);
  read_rope_divisors(file.path(), "rope_factors_short", w.rope_factors_short, config.n_rot,
                     config.rope_factors_short);
  if (config.rope_factors_long.empty() != config.rope_factors_short.empty()) {
    fail(file.path(), ": the file has only one of rope_factors_long and rope_factors_short; "
         "LongRoPE needs both");
  }
  check_positions(file.path(), w, config);
  config.tied_output = !w.output.present();
  if (config.tied_output) w.output = w.token_embd;
  const auto& l0 = w.layers.front();
  config.ffn_gated = l0.ffn_gate.present();
  for (size_t i = 0; i < w.layers.size(); ++i) {
    if (w.layers[i].ffn_gate.present() != config.ffn_gated) {
      fail(file.path(), ": tensor 'blk.", i, ".ffn_gate.weight' is present in some layers only");
    }
  }
  return w;
}

}  // namespace hearth
