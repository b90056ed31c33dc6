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
  // Rows [first, first + n) as a matrix of their own (a view into the same data).
  Matrix rows_range(int64_t first, int64_t n) const { return Matrix{type, row(first), n, cols}; }
};

// Which fields an architecture fills is its weight list's business (model/arch/); absent ones stay
// null / not present. Bias and norm vectors are f32.
struct LayerWeights {
  const float* attn_norm = nullptr;      // [n_embd]
  const float* attn_norm_b = nullptr;    // [n_embd]  LayerNorm bias (falcon, opt)
  const float* attn_norm_2 = nullptr;    // [n_embd]  falcon-40B: the attention's own norm
  const float* attn_norm_2_b = nullptr;  // [n_embd]
  // Falcon's fused projection: all Q rows, then K, then V. Its wq/wk/wv are views of these rows
  // (so byte counts over wq, wk, wv, wo hold for every architecture).
  Matrix wqkv;                       // [n_head * head_dim + 2 * n_embd_kv, n_embd]
  Matrix wq;                         // [n_head * head_dim, n_embd]
  Matrix wk;                         // [n_head_kv * head_dim, n_embd]
  Matrix wv;                         // [n_head_kv * head_dim, n_embd]
  Matrix wo;                         // [n_embd, n_head * head_dim]
  const float* bq = nullptr;         // [n_head * head_dim]  (opt)
  const float* bk = nullptr;         // [n_head_kv * head_dim]
  const float* bv = nullptr;         // [n_head_kv * head_dim]
  const float* bo = nullptr;         // [n_embd]
  const float* ffn_norm = nullptr;   // [n_embd]
  const float* ffn_norm_b = nullptr; // [n_embd]  (opt)
  Matrix ffn_gate;                   // [n_ff, n_embd]   (absent for plain-ReLU FFNs)
  Matrix ffn_up;                     // [n_ff, n_embd]
  Matrix ffn_down;                   // [n_embd, n_ff]   (or, neuron-major, ffn_down_t)
  Matrix ffn_down_t;                 // [n_ff, n_embd]   row i = the output column of neuron i
  const float* ffn_up_b = nullptr;   // [n_ff]    (opt)
  const float* ffn_down_b = nullptr; // [n_embd]  (opt; whichever of ffn_down / ffn_down_t is there)
  // Activation predictor (PowerInfer's): score = fc2 · relu(fc1 · p). Its width H varies per layer.
  Matrix fc1;                        // [H, n_embd]
  Matrix fc2;                        // [n_ff, H]

  bool has_predictor() const { return fc1.present() && fc2.present(); }
};

struct Weights {
  Matrix token_embd;                  // [n_vocab, n_embd]
  Matrix pos_embd;                    // [n_pos, n_embd]  learned positions (opt), else absent
  int64_t pos_offset = 0;             // position p reads row p + pos_offset of pos_embd (opt: 2)
  const float* output_norm = nullptr; // [n_embd]
  const float* output_norm_b = nullptr; // [n_embd]  (falcon, opt)
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

// The per-architecture weight lists, visited once each for loading, validation, and (later)
// placement and saving. A spec may depend on what an earlier one bound (the predictors' width, the
// bias of whichever ffn_down layout the file has): visit() binds before it returns.
using WeightVisitor = std::function<void(const WeightSpec&)>;
void visit_llama_weights(const ModelConfig& config, Weights& weights, const WeightVisitor& visit);
void visit_falcon_weights(const ModelConfig& config, Weights& weights, const WeightVisitor& visit);
void visit_opt_weights(const ModelConfig& config, Weights& weights, const WeightVisitor& visit);
// The list of config's architecture (arch_family): for code that walks a model's tensors by role
// without binding them (hearth quantize picks the matrices to convert with it).
void visit_weights(const ModelConfig& config, Weights& weights, const WeightVisitor& visit);

// Binds every weight of the list to its tensor in the file, checking names, shapes and types, and
// completes config.n_vocab / ffn_gated / tied_output (and, with learned positions, n_ctx_train)
// from what the file holds. The list is the architecture's (arch_family). Every layer has
// ffn_down or ffn_down_t (or both), and either every layer has a predictor or none has.
Weights bind_weights(const gguf::GgufFile& file, ModelConfig& config);

}  // namespace hearth
