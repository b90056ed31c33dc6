// One slot of the engine: a sequence of the shared multi-sequence Session and the request
// generating on it. The scheduler (scheduler.h) drives every slot one step at a time from its
// engine thread: input() says what the slot evaluates in the next batch (a chunk of its prompt or
// its last sampled token), advance() takes the logits that batch produced, samples, and streams the
// token's text to the job. A slot also remembers the tokens its sequence's KV cache holds, so the
// next request that starts with them continues from there (prompt caching): all of them, or in a
// session whose generated tokens are not what a prompt would compute (dense prompts before sparse
// decode steps, Session::prompt_matches_decode) only those it evaluated as a prompt, so that a
// request's answer does not depend on what the slot served before.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hearth/model.h"
#include "sampling/sampler.h"
#include "server/generation.h"
#include "text/stop_strings.h"

namespace hearth::server {

class Slot {
 public:
  // reuse_generated: later prompts may continue from the generated tokens in the cache.
  Slot(int32_t seq, const Model& model, bool reuse_generated);

  int32_t seq() const { return seq_; }
  bool busy() const { return job_ != nullptr; }
  bool ingesting() const { return busy() && prompt_pos_ < job_->request().prompt.size(); }
  const std::shared_ptr<GenerationJob>& job() const { return job_; }

  // How many leading tokens of `prompt` the cache holds already, keeping at least one to evaluate
  // (its logits are needed).
  int32_t reusable(const std::vector<int32_t>& prompt) const;

  // Starts `job` with the first `reuse` tokens of the cache kept (the caller truncated the
  // sequence to them). Throws hearth::Error when the sampling parameters are invalid.
  void start(std::shared_ptr<GenerationJob> job, int32_t reuse);

  // The tokens to evaluate next: up to `budget` (>= 1) prompt tokens, or the last sampled token.
  // Valid until advance().
  std::span<const int32_t> input(int32_t budget);

  // After the batch evaluated input(): `logits` follow its last token. Samples once the prompt is
  // done; returns false when the request has ended (then take the result with finish()).
  bool advance(std::span<const float> logits, int32_t n_ctx);

  // Ends the request (also one still running: it ends as cancelled) and frees the slot.
  GenerationResult finish();
  // Frees the slot after the job failed, and forgets the cache (the sequence is reset too).
  void drop();

 private:
  bool sample(std::span<const float> logits, int32_t n_ctx);
  void end(Finish f);
  bool emit(std::string_view s, bool final);

  using Clock = std::chrono::steady_clock;

  const int32_t seq_;
  const Model& model_;
  const bool reuse_generated_;
  std::vector<int32_t> cache_;  // the tokens the sequence's KV cache holds, in order
  std::shared_ptr<GenerationJob> job_;
  size_t prompt_pos_ = 0;    // prompt tokens in the cache (its first ones; the rest generated)
  size_t input_size_ = 0;    // tokens input() handed out
  int32_t next_ = -1;        // sampled, not yet evaluated
  std::optional<Sampler> sampler_;
  std::optional<text::StopStringMatcher> stops_;
  std::vector<float> work_;      // [n_vocab] logits the sampler may modify
  std::vector<int32_t> banned_;  // with ignore_eos: every end-of-generation token
  std::vector<int32_t> order_;   // [n_vocab] scratch of token_logprobs
  bool trim_ = false;            // still dropping the whitespace before the reply's first word
  std::string pending_;          // text held back: an unfinished UTF-8 character
  bool ended_ = false;
  GenerationResult result_;
  Clock::time_point t_start_, t_gen_;
};

}  // namespace hearth::server
