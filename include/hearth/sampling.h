// Sampling parameters of a session. Defaults and meanings follow llama.cpp's classic sampler chain
// so that flags copied from a llama.cpp command line behave the same here:
//   repetition penalty -> top-k -> top-p -> min-p -> temperature -> softmax -> seeded draw.
#pragma once

#include <cstdint>

namespace hearth {

// llama.cpp's LLAMA_DEFAULT_SEED. llama.cpp replaces it with a random seed; Hearth uses it as an
// ordinary seed so that the same command reproduces the same text. A frontend that wants fresh
// randomness on every run draws a seed itself and passes it.
inline constexpr uint64_t kDefaultSeed = 0xFFFFFFFFu;

// Largest repetition window accepted: the history is preallocated, and no context is longer.
inline constexpr int32_t kMaxRepeatLastN = 1 << 20;

struct SamplerParams {
  // <= 0 selects greedy decoding (argmax after the repetition penalty, lowest id on ties), as in
  // llama.cpp, where a negative temperature also means greedy. Must be finite.
  float temp = 0.8f;
  // Keep the k most likely tokens; 0 disables. Values above the vocabulary size keep everything.
  int32_t top_k = 40;
  // Keep the smallest set of most likely tokens whose probability reaches top_p; in (0, 1], 1
  // disables.
  float top_p = 0.95f;
  // Drop tokens whose probability is below min_p times the top token's; in [0, 1], 0 disables.
  float min_p = 0.05f;
  // > 0; 1 disables. A recently seen token's logit is divided by it when positive and multiplied
  // by it when negative (llama.cpp's rule), so values > 1 always make repeats less likely.
  float repeat_penalty = 1.0f;
  // How many of the last accepted tokens the penalty looks at; 0 disables. llama.cpp's -1 ("the
  // whole context") is for the frontend to translate into its context size.
  int32_t repeat_last_n = 64;
  uint64_t seed = kDefaultSeed;
};

// Throws hearth::Error naming the first field out of the ranges documented above.
void validate(const SamplerParams& params);

}  // namespace hearth
