#include "server/generation.h"

namespace hearth::server {

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

bool GenerationJob::cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

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
