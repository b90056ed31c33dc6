#include "server/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hearth::server {

const char* finish_reason(Finish f) {
  switch (f) {
    case Finish::Stop: return "stop";
    case Finish::Length: return "length";
    case Finish::Cancelled: return "cancelled";
  }
  return "?";
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int32_t n,
                             std::vector<int32_t>& order) {
  // log p_i = l_i - (max + log Σ exp(l_j - max)), summed in double in vocabulary order.
  double max = -std::numeric_limits<double>::infinity();
  for (const float l : logits) max = std::max(max, static_cast<double>(l));
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double lse = max + std::log(sum);
  TokenLogprobs t;
  t.id = id;
  t.logprob = static_cast<double>(logits[static_cast<size_t>(id)]) - lse;
  const auto k = static_cast<ptrdiff_t>(std::min<size_t>(static_cast<size_t>(n), logits.size()));
  if (k == 0) return t;
  order.resize(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (ptrdiff_t i = 0; i < k; ++i) {
    const int32_t j = order[static_cast<size_t>(i)];
    t.top.emplace_back(j, static_cast<double>(logits[static_cast<size_t>(j)]) - lse);
  }
  return t;
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

void GenerationJob::push_logprobs(TokenLogprobs t) {
  std::lock_guard lock(mu_);
  logprobs_.push_back(std::move(t));
}

std::vector<TokenLogprobs> GenerationJob::logprobs_from(size_t from) const {
  std::lock_guard lock(mu_);
  if (from >= logprobs_.size()) return {};
  return {logprobs_.begin() + static_cast<ptrdiff_t>(from), logprobs_.end()};
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
