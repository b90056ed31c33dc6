#include "chat_conversation.h"

#include <algorithm>

#include "core/error.h"
#include "elapsed.h"

namespace hearth::cli {
namespace {

// Removes the oldest user message and the replies that followed it; false when the only user
// message left is the last one (the turn being asked).
bool drop_oldest_turn(std::vector<text::ChatMessage>& messages) {
  auto is_user = [](const text::ChatMessage& m) { return m.role == "user"; };
  const auto first = std::find_if(messages.begin(), messages.end(), is_user);
  if (first == messages.end()) return false;
  const auto next = std::find_if(first + 1, messages.end(), is_user);
  if (next == messages.end()) return false;
  messages.erase(first, next);
  return true;
}

// The content ranges of `p` that lie at or after byte `from`, as offsets from there.
std::vector<text::TextRange> ranges_after(const text::ChatPrompt& p, size_t from) {
  std::vector<text::TextRange> out;
  for (const auto& [b, e] : p.content) {
    if (e > from) out.emplace_back(std::max(b, from) - from, e - from);
  }
  return out;
}

}  // namespace

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::EndToken: return "end of turn";
    case StopReason::StopString: return "stop string";
    case StopReason::Limit: return "token limit";
    case StopReason::Interrupted: return "interrupted (Ctrl-C)";
    case StopReason::ContextFull: return "context full";
  }
  return "?";
}

ChatConversation::ChatConversation(Session& session, text::ChatRenderer renderer,
                                   const SamplerParams& sampling, std::string system)
    : session_(session),
      model_(session.model()),
      renderer_(std::move(renderer)),
      sampler_(sampling, static_cast<int32_t>(session.model().config().n_vocab)),
      logits_(static_cast<size_t>(session.model().config().n_vocab)) {
  if (!system.empty()) messages_.push_back({"system", std::move(system)});
}

void ChatConversation::reset() {
  std::erase_if(messages_, [](const text::ChatMessage& m) { return m.role != "system"; });
  session_.reset();
  cached_text_.clear();
}

std::vector<int32_t> ChatConversation::tokenize_from_scratch(const text::ChatPrompt& p) const {
  return model_.tokenize(p.text, model_.add_bos_default(), p.content);
}


ChatConversation::Prompt ChatConversation::make_prompt(std::vector<text::ChatMessage> messages,
                                                       int32_t n_predict) const {
  const int64_t n_ctx = session_.n_ctx();
  // Room kept for the reply, so that a long history does not leave it a handful of tokens.
  const int64_t reserve = n_predict >= 0 ? std::min<int64_t>(n_predict, n_ctx / 2) : n_ctx / 4;
  Prompt p;
  bool scratch = session_.n_past() == 0;
  for (;;) {
    // The template's control tokens are parsed, the messages' own text is text ("</s>" typed by
    // the user stays four characters).
    const text::ChatPrompt rendered = renderer_.render_prompt(messages);
    p.text = rendered.text;
    p.from_scratch = scratch || !p.text.starts_with(cached_text_);
    if (!p.from_scratch) {
      p.tokens = model_.tokenize(std::string_view(p.text).substr(cached_text_.size()),
                                 /*add_bos=*/false, ranges_after(rendered, cached_text_.size()));
      // Without new tokens there would be no logits to sample from (the cache keeps none).
      p.from_scratch = p.tokens.empty();
    }
    if (p.from_scratch) p.tokens = tokenize_from_scratch(rendered);
    const int64_t need = (p.from_scratch ? 0 : session_.n_past()) + static_cast<int64_t>(p.tokens.size());
    if (need + reserve <= n_ctx) break;
    if (drop_oldest_turn(messages)) {
      ++p.n_dropped_turns;
      scratch = true;  // the rendering no longer starts with what the cache holds
      continue;
    }
    if (!p.from_scratch) {  // the cache's content itself may be what does not fit
      scratch = true;
      continue;
    }
    // Only the new message is left: go on with less room for the reply if there is any at all.
    if (need < n_ctx) break;
    fail("the message needs ", need, " tokens with the chat template and the context holds ",
         n_ctx, " (raise -c); it was not sent");
  }
  p.messages = std::move(messages);
  return p;
}

std::span<const float> ChatConversation::extend(std::span<const int32_t> tokens,
                                                std::string_view text, bool prompt) {
  const auto logits = prompt ? session_.eval_prompt(tokens) : session_.eval(tokens);
  cached_text_ += text;
  return logits;
}

TurnStats ChatConversation::reply(const std::string& user, int32_t n_predict,
                                  const std::function<void(std::string_view)>& on_text,
                                  const std::function<bool()>& interrupted) {
  auto with_user = messages_;
  with_user.push_back({"user", user});
  Prompt p = make_prompt(std::move(with_user), n_predict);

  TurnStats st;
  st.n_dropped_turns = p.n_dropped_turns;
  st.re_evaluated = p.from_scratch && session_.n_past() > 0;
  if (p.from_scratch) {
    session_.reset();
    cached_text_.clear();
  }
  st.n_reused = session_.n_past();
  st.n_evaluated = static_cast<int32_t>(p.tokens.size());
  messages_ = std::move(p.messages);

  const auto t_prompt = Clock::now();
  for (const int32_t t : p.tokens) sampler_.accept(t);
  auto logits = extend(p.tokens, std::string_view(p.text).substr(cached_text_.size()), true);
  st.prompt_s = seconds_since(t_prompt);

  const auto t_gen = Clock::now();
  text::StopStringMatcher stops(renderer_.stop_strings());
  std::string reply;
  auto show = [&](std::string s) {
    if (s.empty()) return;
    reply += s;
    on_text(s);
  };
  st.stop = n_predict == 0 ? StopReason::Limit
                           : generate(logits, n_predict, stops, show, interrupted, st.n_generated);
  if (!stops.stopped()) show(stops.flush());
  st.gen_s = seconds_since(t_gen);
  messages_.push_back({"assistant", std::move(reply)});
  return st;
}

StopReason ChatConversation::generate(std::span<const float> logits, int32_t n_predict,
                                      text::StopStringMatcher& stops,
                                      const std::function<void(std::string)>& show,
                                      const std::function<bool()>& interrupted,
                                      int32_t& n_generated) {
  for (;;) {
    if (interrupted()) return StopReason::Interrupted;
    logits_.assign(logits.begin(), logits.end());
    const int32_t next = sampler_.sample(logits_);
    if (model_.is_eog(next)) return StopReason::EndToken;
    sampler_.accept(next);
    ++n_generated;
    const std::string piece = model_.token_to_piece(next);
    show(stops.push(piece));
    // The token that ends a reply stays out of the cache: the next turn's rendering writes the end
    // of the turn its own way, and a reply that ends here costs no forward pass.
    if (stops.stopped()) return StopReason::StopString;
    if (n_predict >= 0 && n_generated >= n_predict) return StopReason::Limit;
    if (session_.n_past() >= session_.n_ctx()) return StopReason::ContextFull;
    logits = extend({&next, 1}, piece, false);
  }
}

}  // namespace hearth::cli
