#include "backend/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <thread>
#include <vector>

#include "core/error.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hearth::cpu {
namespace {

// How long a worker polls for the next task before it sleeps. Decode calls run() back to back
// with only a few microseconds of serial work in between, so a short poll avoids a futex wake-up
// per op; past it an idle pool costs nothing.
constexpr auto kSpinTime = std::chrono::microseconds(200);
// Polls between clock reads, so the clock itself costs little.
constexpr int kPollsPerClockRead = 64;
// Past this many polls a waiting thread yields its core between polls: when the machine has
// fewer free cores than pool threads (a shared or oversubscribed machine), the thread being
// waited for may need exactly that core.
constexpr int kPollsBeforeYield = 256;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls until done() holds, yielding the core after a while (see kPollsBeforeYield).
template <typename Done>
void poll_until(const Done& done) {
  for (int polls = 1; !done(); ++polls) {
    if (polls < kPollsBeforeYield) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the futex word must be a plain 32-bit atomic");

// Sleeps while *word == expected (may return spuriously; callers re-check).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
#else
  word.wait(expected, std::memory_order_seq_cst);
#endif
}

void futex_wake_all(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
#else
  word.notify_all();
#endif
}

}  // namespace

// Cache-line layout: what the caller publishes (task, stop, epoch) shares one line, so a worker
// gets all of it in a single transfer; `pending`, written by finishing workers, and `sleepers`
// live on lines of their own so those writes do not disturb the pollers.
struct ThreadPool::State {
  // Written by the caller before the epoch bump (release) and read by workers after they
  // observe it (acquire); valid until pending drops to zero.
  alignas(64) const TaskRef* task = nullptr;
  bool stop = false;
  std::atomic<uint32_t> epoch{0};
  alignas(64) std::atomic<int> pending{0};
  alignas(64) std::atomic<int> sleepers{0};
  alignas(64) std::vector<std::thread> workers;

  // Returns the first epoch different from `seen`: polls, then sleeps on the futex.
  uint32_t await_epoch(uint32_t seen) {
    auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int polls = 1;; ++polls) {
      const uint32_t e = epoch.load(std::memory_order_acquire);
      if (e != seen) return e;
      if (polls < kPollsBeforeYield) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
      if (polls % kPollsPerClockRead == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
    // Announce the sleep before the final check; the caller bumps the epoch before reading
    // `sleepers`, and both sides use sequentially consistent operations, so either this thread
    // sees the new epoch or the caller sees a sleeper and wakes it.
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t e;
    while ((e = epoch.load(std::memory_order_seq_cst)) == seen) futex_wait(epoch, seen);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return e;
  }

  void worker_main(int ith, int nth) {
    uint32_t seen = 0;
    for (;;) {
      seen = await_epoch(seen);
      if (stop) return;
      (*task)(ith, nth);
      pending.fetch_sub(1, std::memory_order_release);
    }
  }

  void publish() {
    epoch.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(epoch);
  }
};

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads),
      ranges_(new ChunkRange[static_cast<size_t>(n_threads > 0 ? n_threads : 1)]),
      state_(new State) {
  if (n_threads < 1) {
    delete state_;
    fail("thread count must be at least 1 (got ", n_threads, ")");
  }
  state_->workers.reserve(static_cast<size_t>(n_threads - 1));
  try {
    for (int i = 1; i < n_threads; ++i) {
      state_->workers.emplace_back([this, i] { state_->worker_main(i, n_threads_); });
    }
  } catch (...) {
    // Release the threads already started before reporting the failure.
    state_->stop = true;
    state_->publish();
    for (auto& t : state_->workers) t.join();
    delete state_;
    throw;
  }
}

ThreadPool::~ThreadPool() {
  state_->stop = true;
  state_->publish();
  for (auto& t : state_->workers) t.join();
  delete state_;
}

void ThreadPool::run(TaskRef task) {
  if (n_threads_ == 1) {
    task(0, 1);
    return;
  }
  State& s = *state_;
  s.task = &task;
  s.pending.store(n_threads_ - 1, std::memory_order_relaxed);
  s.publish();
  task(0, n_threads_);
  // Workers finish within microseconds of the caller in balanced kernels; when one is late
  // (descheduled on a busy machine) the caller yields so it does not hold the core it needs.
  poll_until([&s] { return s.pending.load(std::memory_order_acquire) == 0; });
}

void Turns::wait(int ith) const {
  poll_until([this, ith] { return next_.load(std::memory_order_acquire) == ith; });
}

}  // namespace hearth::cpu
