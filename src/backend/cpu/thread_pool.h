// A fixed pool of worker threads for data-parallel kernels. run() is called many times per token,
// so it neither allocates nor takes a lock on the fast path: workers spin briefly on an epoch
// counter before sleeping, and the caller takes part as thread 0.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

namespace hearth::cpu {

// Non-owning reference to a callable `void(int ith, int nth)`; cheap to pass, never allocates.
class TaskRef {
 public:
  template <typename F>
  TaskRef(F& f)  // NOLINT(google-explicit-constructor): implicit by design
      : obj_(static_cast<void*>(&f)), call_([](void* o, int ith, int nth) {
          (*static_cast<F*>(o))(ith, nth);
        }) {}
  void operator()(int ith, int nth) const { call_(obj_, ith, nth); }

 private:
  void* obj_;
  void (*call_)(void*, int, int);
};

// Chunks [front, back) of one thread's share of a job, taken from the front by their owner, which
// so reads its share in order, and from the back by threads done with their own share. Packed in
// one atomic word (chunk numbers below 2^32).
class ChunkRange {
 public:
  void reset(int64_t front, int64_t back) {
    word_.store(pack(front, back), std::memory_order_relaxed);
  }
  // The next chunk, or -1 once none is left.
  int64_t take_front() { return take(true); }
  int64_t take_back() { return take(false); }

 private:
  int64_t take(bool from_front) {
    uint64_t w = word_.load(std::memory_order_relaxed);
    for (;;) {
      const auto front = static_cast<int64_t>(w >> 32);
      const auto back = static_cast<int64_t>(w & 0xffffffffu);
      if (front >= back) return -1;
      const uint64_t rest = from_front ? pack(front + 1, back) : pack(front, back - 1);
      if (word_.compare_exchange_weak(w, rest, std::memory_order_relaxed)) {
        return from_front ? front : back - 1;
      }
    }
  }
  static uint64_t pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  }
  alignas(64) std::atomic<uint64_t> word_{0};
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, the caller included; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // size() chunk ranges for the caller of run() to hand out a job's chunks with (one per thread,
  // reset by the caller before the run). Like run(), for one caller at a time.
  ChunkRange* chunk_ranges() { return ranges_.get(); }

  // Runs task(ith, nth) on every thread (ith = 0 on the caller) and returns when all are done.
  // One caller at a time, and not from inside a task; the task must not throw.
  void run(TaskRef task);

  template <typename F>
  void run(F&& f) {
    auto& ref = f;
    run(TaskRef(ref));
  }

 private:
  struct State;
  int n_threads_;
  std::unique_ptr<ChunkRange[]> ranges_;
  State* state_;
};

// Turns in thread order within one ThreadPool::run(), for reductions whose bits must not depend
// on the thread count: each thread adds its partial results to a running total when its turn
// comes, so the total is summed in one fixed order (that of the partials) whatever the split.
// Every thread of the run calls wait(ith) and then done(ith) exactly once, in that order.
class Turns {
 public:
  // Returns once threads 0 .. ith - 1 have called done(), whose writes are then visible.
  void wait(int ith) const;
  void done(int ith) { next_.store(ith + 1, std::memory_order_release); }

 private:
  std::atomic<int> next_{0};
};

// Splits [0, n) into nth nearly equal contiguous ranges; returns thread ith's [begin, end).
inline std::pair<int64_t, int64_t> split_range(int64_t n, int ith, int nth) {
  const int64_t per = n / nth, rem = n % nth;
  const int64_t begin = ith * per + (ith < rem ? ith : rem);
  return {begin, begin + per + (ith < rem ? 1 : 0)};
}

// body(first, last) over [0, n), split into one contiguous range per thread (empty ones skipped).
// Unlike a task given to run(), body may throw: the first exception is rethrown here once every
// thread is done. For work outside decode (quantizing, making copies at load).
template <typename Body>
void run_ranges(ThreadPool& pool, int64_t n, const Body& body) {
  std::exception_ptr error;
  std::mutex error_mutex;
  pool.run([&](int ith, int nth) {
    try {
      const auto [first, last] = split_range(n, ith, nth);
      if (first < last) body(first, last);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace hearth::cpu
