// Synthetic Llama-shaped models with random weights, of any size, for tests and benchmarks: the
// project makes the models it needs instead of committing them.
#pragma once

#include <cstdint>
#include <string>

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
};

// Checks the shape constraints (divisibility, block sizes, vocabulary minimum) and throws
// hearth::Error naming the offending option.
void validate(const SynthOptions& options);

// Writes the model as GGUF v3 in llama.cpp's layout, with a byte-level SentencePiece vocabulary.
void write_synthetic_model(const SynthOptions& options, const std::string& path);

}  // namespace hearth
