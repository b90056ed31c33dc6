#include "server/scheduler.h"

#include <algorithm>
#include <exception>

namespace hearth::server {

Scheduler::Scheduler(std::shared_ptr<const Model> model, const SessionOptions& options,
                     int n_slots, size_t queue_capacity, OnResult on_result)
    : on_result_(std::move(on_result)), capacity_(queue_capacity) {
  for (int i = 0; i < n_slots; ++i) sessions_.push_back(std::make_unique<Session>(model, options));
  for (auto& s : sessions_) workers_.emplace_back([this, &s] { work(*s); });
}

Scheduler::~Scheduler() { stop(); }

bool Scheduler::submit(std::shared_ptr<GenerationJob> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void Scheduler::stop() {
  std::deque<std::shared_ptr<GenerationJob>> dropped;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    for (auto& job : running_) job->cancel();
  }
  cv_.notify_all();
  for (auto& job : dropped) job->fail(std::string(kShuttingDown));
  for (auto& w : workers_) w.join();
  workers_.clear();
}

size_t Scheduler::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

int Scheduler::active() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(running_.size());
}

int32_t Scheduler::n_ctx() const { return sessions_.front()->n_ctx(); }

void Scheduler::work(Session& session) {
  for (;;) {
    std::shared_ptr<GenerationJob> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(job);
    }
    if (job->cancelled()) {  // the client left while it waited
      job->fail("cancelled");
    } else {
      try {
        const GenerationResult r =
            generate(session, job->request(), [&](std::string_view t) { return job->push(t); });
        if (on_result_) on_result_(r);
        job->finish(r);
      } catch (const std::exception& e) {
        job->fail(e.what());
      }
    }
    std::lock_guard lock(mu_);
    running_.erase(std::find(running_.begin(), running_.end(), job));
  }
}

}  // namespace hearth::server
