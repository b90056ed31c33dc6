// Views of a model's weights inside the mapped GGUF file. Nothing here owns tensor data except
// `owned`, which holds vectors that had to be converted to f32 at load (e.g. f16 norm weights).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf.h"
#include "hearth/types.h"

namespace hearth {

// A weight matrix in ggml layout: `rows` rows of `cols` contiguous elements (GGUF ne = {cols, rows}).
struct Matrix {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  bool present() const { return data != nullptr; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(type, cols); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes(type, cols);
  }
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  Matrix wq;                         // [n_head * head_dim, n_embd]
  Matrix wk;                         // [n_head_kv * head_dim, n_embd]
  Matrix wv;                         // [n_head_kv * head_dim, n_embd]
  Matrix wo;                         // [n_embd, n_head * head_dim]
  const float* ffn_norm = nullptr;   // [n_embd]
  Matrix ffn_gate;                   // [n_ff, n_embd]   (absent for plain-ReLU FFNs)
  Matrix ffn_up;                     // [n_ff, n_embd]
  Matrix ffn_down;                   // [n_embd, n_ff]   (or, neuron-major, ffn_down_t)
  Matrix ffn_down_t;                 // [n_ff, n_embd]   row i = the output column of neuron i
  // Activation predictor (PowerInfer's): score = fc2 · relu(fc1 · p). Its width H varies per layer.
  Matrix fc1;                        // [H, n_embd]
  Matrix fc2;                        // [n_ff, H]

  bool has_predictor() const { return fc1.present() && fc2.present(); }
};

struct Weights {
  Matrix token_embd;                  // [n_vocab, n_embd]
  const float* output_norm = nullptr; // [n_embd]
  Matrix output;                      // [n_vocab, n_embd] (token_embd when tied)
  std::vector<LayerWeights> layers;
  std::vector<std::vector<float>> owned;
};

// One entry of an architecture's weight list. Exactly one of `matrix` / `vector` is set.
// kAnyDim in a spec accepts any size (the predictors' hidden width).
inline constexpr int64_t kAnyDim = -1;

struct WeightSpec {
  std::string name;
  int64_t ne0 = 0;  // contiguous dimension
  int64_t ne1 = 1;  // 1 for vectors
  bool required = true;
  Matrix* matrix = nullptr;
  const float** vector = nullptr;
};

// The per-architecture weight list, visited once each for loading, validation, and (later)
// placement and saving.
using WeightVisitor = std::function<void(const WeightSpec&)>;
void visit_llama_weights(const ModelConfig& config, Weights& weights, const WeightVisitor& visit);

// Binds every weight of the list to its tensor in the file, checking names, shapes and types, and
// completes config.n_vocab / ffn_gated / tied_output from what the file holds. Every layer has
// exactly one of ffn_down / ffn_down_t, and either every layer has a predictor or none has.
Weights bind_weights(const gguf::GgufFile& file, ModelConfig& config);

}  // namespace hearth
