// The token sampler of one session: llama.cpp's classic chain (see hearth/sampling.h) over a
// logit vector. sample() runs once per generated token, so every buffer is allocated up front and
// the hot path neither allocates nor sorts more than the filters require.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "hearth/sampling.h"

namespace hearth {

class Sampler {
 public:
  // Validates params (throws hearth::Error) and allocates all working memory for n_vocab tokens.
  Sampler(const SamplerParams& params, int32_t n_vocab);

  // Picks the next token from logits (size n_vocab). The repetition penalty is applied in place,
  // so logits are modified. Throws hearth::Error when a logit is NaN or +inf, or when every token
  // is masked with -inf, since no distribution exists then.
  int32_t sample(std::span<float> logits);

  // Records a token for the repetition penalty. Frontends usually feed prompt tokens too, as
  // llama.cpp does, so that the penalty also covers text the user wrote.
  void accept(int32_t token);

  // Forgets the history and restarts the random sequence from the seed, so a reset sampler
  // repeats its earlier draws for the same logits.
  void reset();

  const SamplerParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  void apply_repetition_penalty(std::span<float> logits);
  // Moves the top_k best candidates, sorted, to the front of ids_; returns how many remain.
  int32_t keep_top_k(const float* logits);
  // Keeps, in order, the candidates whose logit reaches min_logit; returns how many remain.
  int32_t keep_at_least(const float* logits, int32_t n, float min_logit);
  // Shortens the candidates to the top_p nucleus, given weights_ by token id and their sum over
  // the candidates before min-p. The nucleus comes first in ids_, in a deterministic order.
  int32_t keep_top_p(const float* logits, int32_t n, bool sorted, double normalizer);
  int32_t draw(const float* logits, int32_t n, float max_logit);
  double next_uniform();  // in [0, 1)

  SamplerParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<int32_t> ids_;        // candidate token ids, best first once sorted
  std::vector<float> weights_;      // unnormalized probabilities: by id for top-p, by position
                                    // in ids_ for the draw
  std::vector<int32_t> history_;    // ring buffer of the last repeat_last_n accepted tokens
  std::vector<uint8_t> penalized_;  // per token: already penalized in this call (repeats count once)
  int32_t history_head_ = 0;        // next slot to write
  int32_t history_size_ = 0;
};

}  // namespace hearth
