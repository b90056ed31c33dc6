// Slots and the request queue: --parallel N sessions share one Model, each driven by its own
// worker thread, and requests wait in a bounded FIFO for a free slot. This is concurrency, not
// batching: every slot runs its own forward passes (the engine has no multi-sequence forward yet).
#pragma once

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

namespace hearth::server {

// The error of jobs still queued when the server stops (answered 503, not 500).
inline constexpr std::string_view kShuttingDown = "the server is shutting down";

class Scheduler {
 public:
  // Called by a worker after each job that ran (cancelled ones too).
  using OnResult = std::function<void(const GenerationResult&)>;

  // Makes the sessions (throws hearth::Error when one cannot be made) and starts the workers.
  Scheduler(std::shared_ptr<const Model> model, const SessionOptions& options, int n_slots,
            size_t queue_capacity, OnResult on_result);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the job; false when the queue is full or the scheduler stopped (answer 503).
  bool submit(std::shared_ptr<GenerationJob> job);
  // Refuses new jobs, fails the queued ones, lets running ones end at their next token (they are
  // cancelled) and joins the workers.
  void stop();

  size_t queued() const;
  int active() const;
  int n_slots() const { return static_cast<int>(sessions_.size()); }
  int32_t n_ctx() const;

 private:
  void work(Session& session);

  std::vector<std::unique_ptr<Session>> sessions_;
  OnResult on_result_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  std::vector<std::shared_ptr<GenerationJob>> running_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace hearth::server
