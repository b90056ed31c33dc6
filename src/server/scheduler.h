// Continuous batching: one engine thread owns one multi-sequence Session (a sequence per slot,
// --parallel of them) and runs every active request in the same forward passes, so the weights are
// read once per step for all clients. Each step it
//   1. admits queued requests into free slots (the slot whose cache shares the longest prefix with
//      the prompt, which then continues from there),
//   2. retires the slots whose client cancelled or left,
//   3. builds one batch: one token for every generating slot, then prompt chunks for the slots
//      still reading their prompt (at most prompt_chunk tokens in all while others generate, so
//      they keep a steady pace; the whole batch otherwise),
//   4. evaluates it (Session::eval_batch), and lets each slot sample and stream its token,
//   5. retires the slots that finished.
// Requests wait in a bounded FIFO for a free slot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "hearth/model.h"
#include "hearth/session.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/slot.h"

namespace hearth::server {

// The error of jobs still queued when the server stops (answered 503, not 500).
inline constexpr std::string_view kShuttingDown = "the server is shutting down";

struct SchedulerOptions {
  int n_slots = 1;
  size_t queue_capacity = 4;
  // Prompt tokens per step while other slots generate (each step then takes about as long as
  // evaluating this many tokens).
  int32_t prompt_chunk = 64;
  bool cache_prompt = true;  // reuse a slot's KV cache for a prompt that starts with its tokens
};

class Scheduler {
 public:
  // Called on the engine thread after each job that ran (cancelled ones too).
  using OnResult = std::function<void(const GenerationResult&)>;

  // Makes the session (throws hearth::Error when it cannot be made) and starts the engine.
  Scheduler(std::shared_ptr<const Model> model, const SessionOptions& session,
            const SchedulerOptions& options, OnResult on_result);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the job; false when the queue is full or the scheduler stopped (answer 503).
  bool submit(std::shared_ptr<GenerationJob> job);
  // The client of `job` has gone: cancels it, and when it still waits in the queue takes it out
  // at once (it fails as "cancelled"), so that its place goes to the next request. A running
  // job ends at the engine's next step.
  void cancel(const std::shared_ptr<GenerationJob>& job);
  // Refuses new jobs, fails the queued ones, ends the running ones at the next step (as
  // cancelled) and joins the engine.
  void stop();
  // The first half of stop(), without waiting: the engine ends after the step it is in.
  void request_stop();
  // Waits until the engine has ended (after request_stop), at most until `deadline`; false when
  // it is still in a step then (a long prompt chunk on a large model).
  bool wait_stopped(std::chrono::steady_clock::time_point deadline);

  size_t queued() const;
  int active() const { return active_.load(std::memory_order_relaxed); }
  int n_slots() const { return static_cast<int>(slots_.size()); }
  int32_t n_ctx() const { return session_.n_ctx(); }
  // Queue, slots, and the engine's counters for /metrics.
  SchedulerGauges gauges() const;

 private:
  void run();
  // Waits for work; moves queued jobs into free slots. False once stopping.
  bool admit();
  void start(std::shared_ptr<GenerationJob> job);
  // One forward pass over every active slot.
  void step();
  void retire(Slot& slot);
  void fail(Slot& slot, const std::string& message);
  void publish_stats();

  Session session_;
  const SchedulerOptions options_;
  OnResult on_result_;
  std::vector<Slot> slots_;
  std::vector<Slot*> order_;   // busy slots, oldest request first
  std::vector<SeqTokens> batch_;
  std::vector<Slot*> batch_slots_;
  std::vector<float> logits_;  // [n_slots, n_vocab]
  std::vector<std::shared_ptr<GenerationJob>> admitted_;
  bool freed_ = false;  // a slot was freed since admit() last looked at the queue

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  bool stopping_ = false;
  // Queued jobs or a stop request: the engine takes the lock only when this is set.
  std::atomic<bool> pending_{false};
  std::atomic<int> active_{0};
  std::atomic<uint64_t> neurons_total_{0};
  std::atomic<uint64_t> neurons_active_{0};
  std::atomic<uint64_t> steps_{0};
  std::atomic<uint64_t> tokens_{0};
  bool engine_done_ = false;  // guarded by mu_; cv_ announces it
  std::thread engine_;
};

}  // namespace hearth::server
