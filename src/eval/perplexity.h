// Perplexity and distribution comparison, llama.cpp's method (tools/perplexity there): the text's
// tokens are cut into non-overlapping chunks of n_ctx tokens, each chunk is evaluated from an empty
// context (its first token replaced by BOS when the model adds one), and only the second half is
// scored: the logits of positions first .. n_ctx - 2 (first = n_ctx / 2) predict the tokens at
// first + 1 .. n_ctx - 1, so n_ctx - 1 - first tokens per chunk. Everything is summed in double.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hearth::eval {

// log softmax(logits)[target], computed in double with the maximum subtracted first.
double log_prob(std::span<const float> logits, int32_t target);

// out[i] = log softmax(logits)[i] in double; out.size() must equal logits.size().
void log_softmax(std::span<const float> logits, std::span<double> out);

// KL(P || Q) = sum_i p_i (log p_i - log q_i) with P = softmax(base), Q = softmax(other), in double.
double kl_divergence(std::span<const float> base, std::span<const float> other);

// Index of the largest logit (the first one on ties).
int32_t argmax(std::span<const float> logits);

// Mean of a stream of values and the standard error of that mean (Welford's update, in double).
// The standard error is llama.cpp's: sqrt(population variance / (n - 1)), 0 for fewer than 2 values.
class MeanStat {
 public:
  void add(double x);
  uint64_t count() const { return n_; }
  double mean() const { return mean_; }
  double standard_error() const;

 private:
  uint64_t n_ = 0;
  double mean_ = 0, m2_ = 0;
};

// PPL = exp(mean NLL) and its uncertainty exp(m) * standard error of m, as llama.cpp propagates it.
struct Perplexity {
  double value = 0, error = 0;
};
Perplexity perplexity(const MeanStat& nll);

struct ChunkPlan {
  int64_t n_ctx = 0;     // tokens per chunk
  int64_t n_chunks = 0;  // chunks evaluated
  int64_t first = 0;     // first scored logit row (n_ctx / 2)
  int64_t scored_per_chunk() const { return n_ctx - 1 - first; }
};

// Plans the chunks of a text of n_tokens tokens: n_tokens / n_ctx chunks, at most max_chunks when
// max_chunks > 0. Throws hearth::Error when n_ctx < 4 or the text has fewer than 2 * n_ctx tokens.
ChunkPlan plan_chunks(int64_t n_tokens, int64_t n_ctx, int64_t max_chunks = 0);

// The n_ctx tokens that chunk i evaluates: tokens[i * n_ctx, (i + 1) * n_ctx), the first replaced
// by `bos` when bos >= 0.
std::vector<int32_t> chunk_input(std::span<const int32_t> tokens, const ChunkPlan& plan, int64_t i,
                                 int32_t bos);

// Scores one chunk: `chunk` is its n_ctx original tokens (the targets), `logits` its
// [n_ctx, n_vocab] logits; adds -log p(target) of each scored position to `nll`.
void score_chunk(const ChunkPlan& plan, std::span<const int32_t> chunk, std::span<const float> logits,
                 int64_t n_vocab, MeanStat& nll);

// Compares the scored positions of one chunk under two models/modes: adds KL(base || other) of each
// position to `kl` and counts the positions whose argmax agrees in `same_top1`.
void compare_chunk(const ChunkPlan& plan, std::span<const float> base, std::span<const float> other,
                   int64_t n_vocab, MeanStat& kl, uint64_t& same_top1);

}  // namespace hearth::eval
