#include "server/generation.h"

#include <cmath>

#include "core/error.h"
#include "sampling/sampler.h"
#include "text/stop_strings.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The text path after the stop-string matcher: holds back an unfinished UTF-8 character (JSON
// needs whole characters) and, for chat, the whitespace before the reply's first word.
class TextOut {
 public:
  TextOut(bool trim, const std::function<bool(std::string_view)>& on_text)
      : trim_(trim), on_text_(on_text) {}
  bool emit(std::string_view s, bool final) {
    pending_ += s;
    if (trim_) {
      const size_t b = pending_.find_first_not_of(" \t\r\n");
      pending_.erase(0, b == std::string::npos ? pending_.size() : b);
      trim_ = pending_.empty();
    }
    const size_t n = final ? pending_.size() : utf8_complete_prefix(pending_);
    const std::string out = pending_.substr(0, n);
    pending_.erase(0, n);
    return on_text_(out);
  }

 private:
  bool trim_;
  const std::function<bool(std::string_view)>& on_text_;
  std::string pending_;
};

}  // namespace

const char* finish_reason(Finish f) {
  switch (f) {
    case Finish::Stop: return "stop";
    case Finish::Length: return "length";
    case Finish::Cancelled: return "cancelled";
  }
  return "?";
}

size_t utf8_complete_prefix(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  for (size_t back = 1; back <= 4 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return len > back ? s.size() - back : s.size();
  }
  return s.size();  // not UTF-8 at all: nothing to wait for
}

GenerationResult generate(Session& session, const GenerationRequest& req,
                          const std::function<bool(std::string_view)>& on_text) {
  const Model& model = session.model();
  GenerationResult res;
  res.n_prompt = static_cast<int32_t>(req.prompt.size());
  if (req.prompt.empty() || res.n_prompt >= session.n_ctx()) {
    fail("the prompt has ", res.n_prompt, " tokens and the context holds ", session.n_ctx());
  }
  session.reset();
  session.reset_stats();
  Sampler sampler(req.sampling, static_cast<int32_t>(model.config().n_vocab));
  for (const int32_t t : req.prompt) sampler.accept(t);

  const auto t_prompt = Clock::now();
  std::span<const float> logits = session.eval(req.prompt);
  res.prompt_s = seconds_since(t_prompt);

  const auto t_gen = Clock::now();
  text::StopStringMatcher stops(req.stop);
  TextOut out(req.trim_leading_space, on_text);
  std::vector<float> work(logits.size());
  std::vector<int32_t> banned;  // with ignore_eos: every end-of-generation token
  for (int32_t id = 0; req.ignore_eos && id < static_cast<int32_t>(work.size()); ++id) {
    if (model.is_eog(id)) banned.push_back(id);
  }
  res.finish = Finish::Length;
  while (req.max_tokens < 0 || res.n_generated < req.max_tokens) {
    work.assign(logits.begin(), logits.end());
    for (const int32_t id : banned) work[static_cast<size_t>(id)] = -INFINITY;
    const int32_t next = sampler.sample(work);
    if (model.is_eog(next)) {
      res.finish = Finish::Stop;
      break;
    }
    sampler.accept(next);
    ++res.n_generated;
    if (!out.emit(stops.push(model.token_to_piece(next)), false)) {
      res.finish = Finish::Cancelled;
      break;
    }
    if (stops.stopped()) {
      res.finish = Finish::Stop;
      break;
    }
    if (session.n_past() >= session.n_ctx()) break;  // full context: "length"
    logits = session.eval({&next, 1});
  }
  if (res.finish != Finish::Cancelled && !out.emit(stops.stopped() ? "" : stops.flush(), true)) {
    res.finish = Finish::Cancelled;
  }
  res.gen_s = seconds_since(t_gen);
  res.sparse = session.sparse_stats();
  return res;
}

bool GenerationJob::push(std::string_view text) {
  std::lock_guard lock(mu_);
  if (cancelled_) return false;
  if (!text.empty()) {
    texts_.emplace_back(text);
    cv_.notify_all();
  }
  return true;
}

void GenerationJob::finish(const GenerationResult& result) {
  std::lock_guard lock(mu_);
  result_ = result;
  done_ = true;
  cv_.notify_all();
}

void GenerationJob::fail(const std::string& message) {
  std::lock_guard lock(mu_);
  error_ = message.empty() ? "generation failed" : message;
  done_ = true;
  cv_.notify_all();
}

bool GenerationJob::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void GenerationJob::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

GenerationJob::Event GenerationJob::next(std::string& text, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !texts_.empty() || done_; })) return Event::Timeout;
  if (!texts_.empty()) {
    text = std::move(texts_.front());
    texts_.pop_front();
    return Event::Text;
  }
  return error_.empty() ? Event::Done : Event::Failed;
}

}  // namespace hearth::server
