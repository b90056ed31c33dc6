// One chat conversation over a Session: the message history, the chat template, and a KV cache
// kept across turns so that each turn evaluates only the tokens the cache lacks.
//
// Cache reuse follows llama.cpp's interactive mode: the cache holds the rendered prompt of earlier
// turns plus the tokens the model generated (not a re-tokenisation of its reply, which may differ).
// A new turn renders the whole conversation; when that text extends the text the cache stands for,
// only the extension is tokenised and evaluated. Otherwise (a template that trims what the model
// wrote, or turns dropped for space) the whole conversation is evaluated again from an empty cache:
// Session has no way to truncate the cache to a common prefix.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/model.h"
#include "hearth/sampling.h"
#include "hearth/session.h"
#include "sampling/sampler.h"
#include "text/chat_renderer.h"
#include "text/stop_strings.h"

namespace hearth::cli {

enum class StopReason { EndToken, StopString, Limit, Interrupted, ContextFull };
const char* to_string(StopReason r);

struct TurnStats {
  int32_t n_reused = 0;        // cached tokens of earlier turns kept
  int32_t n_evaluated = 0;     // prompt tokens evaluated for this turn
  int32_t n_generated = 0;     // reply tokens
  int32_t n_dropped_turns = 0; // oldest user turns dropped to make room
  bool re_evaluated = false;   // the cache could not be extended: evaluated from the start
  double prompt_s = 0;
  double gen_s = 0;
  StopReason stop = StopReason::EndToken;
};

class ChatConversation {
 public:
  // `session` must outlive the conversation; an empty `system` means no system message.
  ChatConversation(Session& session, text::ChatRenderer renderer, const SamplerParams& sampling,
                   std::string system);

  // Adds a user message and generates the reply, handing each piece of text that is ready to show
  // to on_text (the raw text: a leading space the model writes is the caller's to drop), and
  // checking `interrupted` before each token. n_predict < 0: no limit but the context.
  // Throws hearth::Error, leaving the history as it was, when the message cannot fit in the
  // context even after dropping every earlier turn.
  TurnStats reply(const std::string& user, int32_t n_predict,
                  const std::function<void(std::string_view)>& on_text,
                  const std::function<bool()>& interrupted);

  // Forgets every turn (the system message stays) and empties the cache.
  void reset();

  const std::vector<text::ChatMessage>& messages() const { return messages_; }

 private:
  struct Prompt {
    std::vector<text::ChatMessage> messages;  // the history this prompt renders
    std::string text;                         // rendered, with the generation prompt
    std::vector<int32_t> tokens;              // to evaluate
    bool from_scratch = false;                // tokens start at an empty cache
    int32_t n_dropped_turns = 0;
  };
  // The tokens to evaluate for `messages`, dropping the oldest turns while they (and room for the
  // reply) do not fit. Error when even the last user message alone does not fit.
  Prompt make_prompt(std::vector<text::ChatMessage> messages, int32_t n_predict) const;
  std::vector<int32_t> tokenize_from_scratch(const text::ChatPrompt& prompt) const;
  // Evaluates tokens that extend the cache by `text` (a prompt's, or a generated one); returns the
  // last token's logits.
  std::span<const float> extend(std::span<const int32_t> tokens, std::string_view text,
                                bool prompt);
  // Samples reply tokens from `logits` on, passing their text through `stops` to `show`, until
  // one of the StopReasons; counts them in n_generated.
  StopReason generate(std::span<const float> logits, int32_t n_predict,
                      text::StopStringMatcher& stops, const std::function<void(std::string)>& show,
                      const std::function<bool()>& interrupted, int32_t& n_generated);

  Session& session_;
  const Model& model_;
  text::ChatRenderer renderer_;
  Sampler sampler_;
  std::vector<text::ChatMessage> messages_;
  std::string cached_text_;  // the rendered text the session's cache stands for
  std::vector<float> logits_;
};

}  // namespace hearth::cli
