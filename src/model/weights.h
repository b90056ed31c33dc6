// A model's weight list: the tensors its block recipe (ModelConfig::block) names, bound as views
// (core/weight_views.h) into the mapped GGUF file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/weight_views.h"
#include "gguf/gguf.h"
#include "hearth/types.h"

namespace hearth {

// One entry of a model's weight list. Exactly one of `matrix` / `vector` is set.
// kAnyDim in a spec accepts any size (the predictors' hidden width, the position table).
inline constexpr int64_t kAnyDim = -1;

struct WeightSpec {
  std::string name;
  int64_t ne0 = 0;  // contiguous dimension
  int64_t ne1 = 1;  // 1 for vectors
  bool required = true;
  Matrix* matrix = nullptr;
  const float** vector = nullptr;
};

// The weight list of config's block recipe (model/weight_list.cc), visited once each for loading,
// validation, and for code that walks a model's tensors by role without binding them (hearth
// quantize picks the matrices to convert with it). A spec may depend on what an earlier one bound
// (the predictors' width, the bias of whichever ffn_down layout the file has, the views of a
// fused projection): visit() binds before it returns.
using WeightVisitor = std::function<void(const WeightSpec&)>;
void visit_weights(const ModelConfig& config, Weights& weights, const WeightVisitor& visit);

// Binds every weight of the list to its tensor in the file, checking names, shapes and types, and
// completes config.n_vocab / ffn_gated / tied_output (and, with learned positions, n_ctx_train)
// from what the file holds. Every layer has
// ffn_down or ffn_down_t (or both), and either every layer has a predictor or none has.
Weights bind_weights(const gguf::GgufFile& file, ModelConfig& config);

}  // namespace hearth
