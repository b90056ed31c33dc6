#include "server/scheduler.h"

#include <algorithm>
#include <exception>

namespace hearth::server {
namespace {

SessionOptions engine_options(SessionOptions o, const SchedulerOptions& s) {
  o.n_seq = s.n_slots;
  o.n_batch = std::max(o.n_batch, s.n_slots);  // every generating slot's token fits one pass
  return o;
}

}  // namespace

Scheduler::Scheduler(std::shared_ptr<const Model> model, const SessionOptions& session,
                     const SchedulerOptions& options, OnResult on_result)
    : session_(model, engine_options(session, options)),
      options_(options),
      on_result_(std::move(on_result)) {
  const auto n = static_cast<size_t>(options.n_slots);
  slots_.reserve(n);
  for (int32_t i = 0; i < options.n_slots; ++i) {
    slots_.emplace_back(i, *model, session_.prompt_matches_decode());
  }
  order_.reserve(n);
  batch_.reserve(n);
  batch_slots_.reserve(n);
  admitted_.reserve(n);
  logits_.resize(n * static_cast<size_t>(model->config().n_vocab));
  engine_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

bool Scheduler::submit(std::shared_ptr<GenerationJob> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= options_.queue_capacity) return false;
    queue_.push_back(std::move(job));
    pending_ = true;
  }
  cv_.notify_one();
  return true;
}

void Scheduler::cancel(const std::shared_ptr<GenerationJob>& job) {
  job->cancel();
  bool removed = false;
  {
    std::lock_guard lock(mu_);
    const auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) {
      queue_.erase(it);
      removed = true;
    }
  }
  if (removed) job->fail("cancelled");
}

void Scheduler::stop() {
  request_stop();
  if (engine_.joinable()) engine_.join();
}

void Scheduler::request_stop() {
  std::deque<std::shared_ptr<GenerationJob>> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    pending_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& job : dropped) job->fail(std::string(kShuttingDown));
}

bool Scheduler::wait_stopped(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return engine_done_; });
}

size_t Scheduler::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

SchedulerGauges Scheduler::gauges() const {
  SchedulerGauges g;
  g.queued = queued();
  g.active = active();
  g.n_slots = n_slots();
  const uint64_t total = neurons_total_.load(std::memory_order_relaxed);
  const uint64_t on = neurons_active_.load(std::memory_order_relaxed);
  g.ffn_sparsity = total ? 1.0 - static_cast<double>(on) / static_cast<double>(total) : 0.0;
  g.steps = steps_.load(std::memory_order_relaxed);
  g.tokens = tokens_.load(std::memory_order_relaxed);
  return g;
}

void Scheduler::run() {
  while (admit()) {
    if (!order_.empty()) step();
  }
  {
    std::lock_guard lock(mu_);
    engine_done_ = true;
  }
  cv_.notify_all();
}

bool Scheduler::admit() {
  // The lock only when there may be something to take: a step of busy slots with nothing queued
  // (the common case) goes straight on.
  const bool look = order_.empty() || freed_ || pending_.exchange(false);
  if (!look) return true;
  freed_ = false;
  bool stopping = false;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !order_.empty(); });
    stopping = stopping_;
    while (!stopping && order_.size() + admitted_.size() < slots_.size() && !queue_.empty()) {
      admitted_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  if (stopping) {
    while (!order_.empty()) {
      order_.front()->job()->cancel();
      retire(*order_.front());
    }
    return false;
  }
  for (auto& job : admitted_) {
    if (job->cancelled()) {  // the client left while it waited
      job->fail("cancelled");
    } else {
      start(std::move(job));
    }
  }
  admitted_.clear();
  return true;
}

void Scheduler::start(std::shared_ptr<GenerationJob> job) {
  // The free slot whose cache holds the longest prefix of the prompt; the first on a tie.
  Slot* best = nullptr;
  int32_t keep = -1;
  for (Slot& s : slots_) {
    if (s.busy()) continue;
    const int32_t n = options_.cache_prompt ? s.reusable(job->request().prompt) : 0;
    if (n > keep) {
      best = &s;
      keep = n;
    }
  }
  session_.truncate(best->seq(), keep);
  try {
    best->start(job, keep);
  } catch (const std::exception& e) {
    job->fail(e.what());
    return;
  }
  order_.push_back(best);
  active_ = static_cast<int>(order_.size());
}

void Scheduler::step() {
  for (size_t i = 0; i < order_.size();) {
    if (order_[i]->job()->cancelled()) {
      retire(*order_[i]);  // erases order_[i]
    } else {
      ++i;
    }
  }
  batch_.clear();
  batch_slots_.clear();
  int32_t n_gen = 0;
  for (Slot* s : order_) {
    if (s->ingesting()) continue;
    batch_.push_back({s->seq(), s->input(1)});
    batch_slots_.push_back(s);
    ++n_gen;
  }
  int32_t budget = session_.n_batch() - n_gen;
  if (n_gen > 0) budget = std::min(budget, options_.prompt_chunk);
  for (Slot* s : order_) {
    if (budget <= 0) break;
    if (!s->ingesting()) continue;
    batch_.push_back({s->seq(), s->input(budget), /*prompt=*/true});
    batch_slots_.push_back(s);
    budget -= static_cast<int32_t>(batch_.back().tokens.size());
  }
  if (batch_.empty()) return;
  try {
    session_.eval_batch(batch_, logits_);
  } catch (const std::exception& e) {
    for (Slot* s : batch_slots_) fail(*s, e.what());
    return;
  }
  publish_stats();
  const auto n_vocab = static_cast<size_t>(session_.model().config().n_vocab);
  for (size_t i = 0; i < batch_slots_.size(); ++i) {
    Slot& s = *batch_slots_[i];
    try {
      if (!s.advance({logits_.data() + i * n_vocab, n_vocab}, session_.n_ctx())) retire(s);
    } catch (const std::exception& e) {  // the sampler refused the logits
      fail(s, e.what());
    }
  }
}

void Scheduler::retire(Slot& slot) {
  const std::shared_ptr<GenerationJob> job = slot.job();
  const GenerationResult r = slot.finish();
  order_.erase(std::find(order_.begin(), order_.end(), &slot));
  active_ = static_cast<int>(order_.size());  // before the client hears of the end
  freed_ = true;
  if (on_result_) on_result_(r);
  job->finish(r);
}

void Scheduler::fail(Slot& slot, const std::string& message) {
  const std::shared_ptr<GenerationJob> job = slot.job();
  slot.drop();
  session_.reset(slot.seq());
  order_.erase(std::find(order_.begin(), order_.end(), &slot));
  active_ = static_cast<int>(order_.size());
  freed_ = true;
  job->fail(message);
}

void Scheduler::publish_stats() {
  const SparseStats& s = session_.sparse_stats();
  neurons_total_.store(s.neurons_total, std::memory_order_relaxed);
  neurons_active_.store(s.neurons_active, std::memory_order_relaxed);
  steps_.fetch_add(1, std::memory_order_relaxed);
  tokens_.store(s.tokens, std::memory_order_relaxed);
}

}  // namespace hearth::server
