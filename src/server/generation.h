// One request's generation as the HTTP side sees it: what to generate, how it ended, and the
// GenerationJob that carries its text from the engine thread (scheduler.h) to the HTTP thread
// answering the client. The job is also how a client that left stops its generation: the HTTP side
// cancels, the engine's next step sees it and frees the slot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hearth/sampling.h"

namespace hearth::server {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // tokens, BOS included; not empty
  int32_t max_tokens = -1;      // -1: until an end token or a full context
  SamplerParams sampling;
  std::vector<std::string> stop;
  bool trim_leading_space = false;  // a chat reply does not start with the SentencePiece space
  bool ignore_eos = false;          // end-of-generation tokens are never sampled
  int32_t logprobs = -1;  // -1: none; else each token's log-probability and this many alternatives
};

// A generated token's log-probability under the model (the log-softmax of its logits, before any
// sampling parameter) and the `n` most likely tokens with theirs, most likely first.
struct TokenLogprobs {
  int32_t id = 0;
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;
};
// `order` is scratch of the vocabulary's size.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int32_t n,
                             std::vector<int32_t>& order);

enum class Finish { Stop, Length, Cancelled };
const char* finish_reason(Finish f);  // "stop", "length", "cancelled"

struct GenerationResult {
  int32_t n_prompt = 0;
  int32_t n_cached = 0;  // prompt tokens whose KV the slot kept from its previous request
  int32_t n_generated = 0;
  Finish finish = Finish::Stop;
  double prompt_s = 0;  // from the slot's start to the prompt's logits
  double gen_s = 0;     // from there to the end
};

// The length of the longest prefix of s that does not end inside a UTF-8 character.
size_t utf8_complete_prefix(std::string_view s);

class GenerationJob {
 public:
  explicit GenerationJob(GenerationRequest request) : request_(std::move(request)) {}
  const GenerationRequest& request() const { return request_; }

  // Engine side. push() returns false once the job is cancelled. push_logprobs: a generated
  // token's, before its text (requests that asked for them).
  bool push(std::string_view text);
  void push_logprobs(TokenLogprobs t);
  void finish(const GenerationResult& result);
  void fail(const std::string& message);
  bool cancelled() const;

  // HTTP side: the next piece of text, or the end, waiting at most `timeout`.
  enum class Event { Text, Done, Failed, Timeout };
  Event next(std::string& text, std::chrono::milliseconds timeout);
  void cancel();
  // The tokens' log-probabilities pushed so far, from the `from`-th on.
  std::vector<TokenLogprobs> logprobs_from(size_t from) const;
  // Valid after next() returned Done / Failed.
  const GenerationResult& result() const { return result_; }
  const std::string& error() const { return error_; }

 private:
  const GenerationRequest request_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> texts_;
  std::vector<TokenLogprobs> logprobs_;
  std::atomic<bool> cancelled_{false};  // read by the engine every step, without the lock
  bool done_ = false;
  GenerationResult result_;
  std::string error_;
};

}  // namespace hearth::server
