// Synthetic Llama-shaped models with random weights, of any size, for tests and benchmarks: the
// project makes the models it needs instead of committing them.
//
// Dense models (the default) are plain random weights. Sparse models (`sparsity` set) have ReGLU
// FFNs whose neurons fire with a power-law frequency over neuron rank at the requested average
// sparsity, and per-layer predictors (blk.N.fc1/fc2) that find the active neurons; see
// synth_sparse.cc for the construction and synth_measure.h for measuring what a file really does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "hearth/types.h"

namespace hearth {

struct SynthOptions {
  int64_t n_embd = 256;
  int64_t n_layer = 4;
  int64_t n_ff = 768;
  int64_t n_head = 8;
  int64_t n_head_kv = 4;
  int64_t n_vocab = 512;
  int64_t n_ctx = 512;
  DType type = DType::F16;  // weight matrices; norm vectors stay f32
  FfnActivation act = FfnActivation::Silu;
  uint64_t seed = 42;

  // Sparse models. nullopt: a dense model. Otherwise the target share of FFN neurons that are
  // inactive for an average token, in (0, 1); needs act = Relu.
  std::optional<double> sparsity;
  double skew = 1.0;            // power-law exponent of firing frequency over neuron rank
  int64_t predictor_width = 0;  // H, the predictors' hidden width; 0: default_predictor_width()
};

inline constexpr double kSynthMaxSkew = 4.0;
// Firing frequencies of sparse models' neurons stay within these bounds, so the reachable
// sparsities are [1 - kSynthMaxFrequency, 1 - kSynthMinFrequency].
inline constexpr double kSynthMinFrequency = 1e-4;
inline constexpr double kSynthMaxFrequency = 0.999;

// Checks the shape constraints (divisibility, block sizes, vocabulary minimum) and, for sparse
// models, the sparsity, skew and predictor width; throws hearth::Error naming the offending option.
void validate(const SynthOptions& options);

// Writes the model as GGUF v3 in llama.cpp's layout, with a byte-level SentencePiece vocabulary.
void write_synthetic_model(const SynthOptions& options, const std::string& path);

// Measures how often each FFN neuron of the model at `path` fires on n_tokens random tokens (a
// dense session, n_threads threads) and adds it to the file as calibration does
// (blk.N.ffn_act_freq, docs/formats.md), so the placement solver can use it.
void add_activation_stats(const std::string& path, int64_t n_tokens, uint64_t seed,
                          int n_threads);

// Sparse models: the predictor width used when predictor_width is 0. The largest width up to
// n_embd / 8 whose predictor (fc1 + fc2, f16) stays within 8% of the FFN's bytes per token, and
// at least 8.
int64_t default_predictor_width(const SynthOptions& options);

// Sparse models: the firing frequency of the neuron of each rank (0 = hottest), n_ff values:
// f_k = clamp(C * (k + 1)^-skew, kSynthMinFrequency, kSynthMaxFrequency), with C chosen so that
// their mean is 1 - sparsity.
std::vector<double> synth_firing_frequencies(int64_t n_ff, double sparsity, double skew);

}  // namespace hearth
