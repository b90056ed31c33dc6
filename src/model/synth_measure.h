// Measuring what a sparse model really does (DESIGN.md section 6: "measure the sparsity the file
// really has; do not trust the construction"). Used by `hearth synth --sparsity` after writing
// and by the tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hearth/session.h"

namespace hearth {

// FFN neuron counts of one layer (or all), over some tokens.
struct NeuronCounts {
  uint64_t neurons = 0;    // n_ff per token
  uint64_t active = 0;     // truly active: gate · x > 0
  uint64_t predicted = 0;  // predictor score >= the model's threshold
  uint64_t hit = 0;        // both

  double sparsity() const { return neurons ? 1.0 - static_cast<double>(active) / neurons : 0.0; }
  double predicted_sparsity() const {
    return neurons ? 1.0 - static_cast<double>(predicted) / neurons : 0.0;
  }
  double recall() const { return active ? static_cast<double>(hit) / active : 1.0; }
  double precision() const { return predicted ? static_cast<double>(hit) / predicted : 1.0; }
  NeuronCounts& operator+=(const NeuronCounts& o);
};

struct SynthSparsityReport {
  int64_t n_tokens = 0;
  // From the reference forward (reference_forward below), per layer and summed.
  std::vector<NeuronCounts> layers;
  NeuronCounts total;
  // From hearth::Session in Predictor mode with sparse_audit. runtime_measured is false while the
  // runtime reports no neuron counts (then `runtime` is all zeros).
  bool runtime_measured = false;
  SparseStats runtime;
};

// Evaluates n_tokens random token ids (drawn from `seed`) with the model at `path`, which must be
// a gated ReLU (ReGLU) Llama model with predictors, twice: with reference_forward, and one token
// at a time through hearth::Session (SparseMode::Predictor, sparse_audit). n_threads 0: all.
SynthSparsityReport measure_synth_sparsity(const std::string& path, int64_t n_tokens, uint64_t seed,
                                           int n_threads = 0);

// A reference f32 forward pass over `tokens` (positions 0, 1, ...): the FFN, its predictor and
// the norms written plainly from the model's definition, sharing nothing with the engine's but
// the file loader and the row (de)quantizers; the attention half is the engine's one attention
// block (ops/attention_block.h) on a scalar context. Like the engine (and llama.cpp) it rounds activations to Q8_0 before
// products with Q8_0/Q4_0 matrices; the KV cache stays f32. Returns the neuron counts of every
// layer (the predictor reads the residual stream before ffn_norm). With `logits`, also fills it
// with [tokens.size(), n_vocab] logits; with `fires`, with [n_layer][n_ff] counts of the tokens
// for which each neuron was truly active. Needs a gated ReLU FFN; predicted counts are 0 for
// models without predictors.
std::vector<NeuronCounts> reference_forward(const std::string& path,
                                            std::span<const int32_t> tokens, int n_threads,
                                            std::vector<float>* logits = nullptr,
                                            std::vector<std::vector<uint32_t>>* fires = nullptr);

}  // namespace hearth
