#include "server/slot.h"

#include <algorithm>
#include <cmath>

namespace hearth::server {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Slot::Slot(int32_t seq, const Model& model, bool reuse_generated)
    : seq_(seq), model_(model), reuse_generated_(reuse_generated) {
  work_.reserve(static_cast<size_t>(model.config().n_vocab));
}

int32_t Slot::reusable(const std::vector<int32_t>& prompt) const {
  const size_t most = std::min(reuse_generated_ ? cache_.size() : prompt_pos_, prompt.size() - 1);
  size_t n = 0;
  while (n < most && cache_[n] == prompt[n]) ++n;
  return static_cast<int32_t>(n);
}

void Slot::start(std::shared_ptr<GenerationJob> job, int32_t reuse) {
  const GenerationRequest& req = job->request();
  const auto n_vocab = static_cast<int32_t>(model_.config().n_vocab);
  sampler_.emplace(req.sampling, n_vocab);  // first: throws on bad parameters, slot still free
  for (const int32_t t : req.prompt) sampler_->accept(t);
  stops_.emplace(req.stop);
  banned_.clear();
  for (int32_t id = 0; req.ignore_eos && id < n_vocab; ++id) {
    if (model_.is_eog(id)) banned_.push_back(id);
  }
  job_ = std::move(job);
  cache_.resize(static_cast<size_t>(reuse));
  prompt_pos_ = static_cast<size_t>(reuse);
  input_size_ = 0;
  next_ = -1;
  trim_ = req.trim_leading_space;
  pending_.clear();
  ended_ = false;
  result_ = GenerationResult{};
  result_.n_prompt = static_cast<int32_t>(req.prompt.size());
  result_.n_cached = reuse;
  t_start_ = t_gen_ = Clock::now();
}

std::span<const int32_t> Slot::input(int32_t budget) {
  if (!ingesting()) {
    input_size_ = 1;
    return {&next_, 1};
  }
  const std::vector<int32_t>& prompt = job_->request().prompt;
  input_size_ = std::min(static_cast<size_t>(std::max(budget, 1)), prompt.size() - prompt_pos_);
  return {prompt.data() + prompt_pos_, input_size_};
}

bool Slot::advance(std::span<const float> logits, int32_t n_ctx) {
  if (ingesting()) {
    const std::vector<int32_t>& prompt = job_->request().prompt;
    const auto from = prompt.begin() + static_cast<std::ptrdiff_t>(prompt_pos_);
    cache_.insert(cache_.end(), from, from + static_cast<std::ptrdiff_t>(input_size_));
    prompt_pos_ += input_size_;
    if (ingesting()) return true;  // logits of a prompt token in the middle: not needed
    t_gen_ = Clock::now();
    result_.prompt_s = seconds_between(t_start_, t_gen_);
    if (job_->request().max_tokens == 0) {
      end(Finish::Length);
      return false;
    }
  } else {
    cache_.push_back(next_);
  }
  return sample(logits, n_ctx);
}

bool Slot::sample(std::span<const float> logits, int32_t n_ctx) {
  const GenerationRequest& req = job_->request();
  work_.assign(logits.begin(), logits.end());
  for (const int32_t id : banned_) work_[static_cast<size_t>(id)] = -INFINITY;
  const int32_t next = sampler_->sample(work_);
  if (model_.is_eog(next)) {
    end(Finish::Stop);
    return false;
  }
  sampler_->accept(next);
  ++result_.n_generated;
  if (req.logprobs >= 0) job_->push_logprobs(token_logprobs(logits, next, req.logprobs, order_));
  if (!emit(stops_->push(model_.token_to_piece(next)), false)) {
    end(Finish::Cancelled);
  } else if (stops_->stopped()) {
    end(Finish::Stop);
  } else if ((req.max_tokens >= 0 && result_.n_generated >= req.max_tokens) ||
             cache_.size() >= static_cast<size_t>(n_ctx)) {  // a full context: "length" too
    end(Finish::Length);
  } else {
    next_ = next;
    return true;
  }
  return false;
}

// Records how the request ended and sends the text still held back (unless the client left).
void Slot::end(Finish f) {
  result_.finish = f;
  if (f != Finish::Cancelled && !emit(stops_->stopped() ? "" : stops_->flush(), true)) {
    result_.finish = Finish::Cancelled;
  }
  const auto now = Clock::now();
  if (ingesting()) {
    result_.prompt_s = seconds_between(t_start_, now);
  } else {
    result_.gen_s = seconds_between(t_gen_, now);
  }
  ended_ = true;
}

// The text path after the stop-string matcher: holds back an unfinished UTF-8 character (JSON
// needs whole characters) and, for chat, the whitespace before the reply's first word. False when
// the client is gone.
bool Slot::emit(std::string_view s, bool final) {
  pending_ += s;
  if (trim_) {
    const size_t b = pending_.find_first_not_of(" \t\r\n");
    pending_.erase(0, b == std::string::npos ? pending_.size() : b);
    trim_ = pending_.empty();
  }
  const size_t n = final ? pending_.size() : utf8_complete_prefix(pending_);
  const bool open = job_->push(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return open;
}

GenerationResult Slot::finish() {
  if (!ended_) end(Finish::Cancelled);
  job_.reset();
  sampler_.reset();
  return result_;
}

void Slot::drop() {
  job_.reset();
  sampler_.reset();
  cache_.clear();
  prompt_pos_ = 0;
}

}  // namespace hearth::server
