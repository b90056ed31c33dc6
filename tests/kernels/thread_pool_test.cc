// The pool must run every task on every thread exactly once per run(), publish the caller's
// writes to workers and the workers' writes back, and survive idle periods long enough for the
// workers to fall asleep.
#include "backend/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "common/kernel_test_util.h"

namespace hearth {
namespace {

using cpu::ThreadPool;

TEST(ThreadPool, SplitRangeCoversEvenly) {
  for (int64_t n : {0, 1, 5, 64, 1001}) {
    for (int nth = 1; nth <= 7; ++nth) {
      int64_t next = 0;
      for (int i = 0; i < nth; ++i) {
        const auto [b, e] = cpu::split_range(n, i, nth);
        EXPECT_EQ(b, next);
        EXPECT_GE(e - b, n / nth);
        EXPECT_LE(e - b, n / nth + 1);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ThreadPool, EveryThreadRunsOncePerRun) {
  for (int nth = 1; nth <= 4; ++nth) {
    ThreadPool pool(nth);
    EXPECT_EQ(pool.size(), nth);
    std::vector<int> hits(static_cast<size_t>(nth), 0);  // each slot written by one thread only
    for (int run = 0; run < 2000; ++run) {
      pool.run([&](int ith, int n) {
        ASSERT_EQ(n, nth);
        ++hits[static_cast<size_t>(ith)];
      });
    }
    for (int i = 0; i < nth; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)], 2000) << "thread " << i;
  }
}

TEST(ThreadPool, ResultsAreVisibleAfterRun) {
  for (int nth = 1; nth <= 4; ++nth) {
    ThreadPool pool(nth);
    const int64_t n = 10007;
    std::vector<int64_t> data(static_cast<size_t>(n));
    for (int64_t run = 0; run < 300; ++run) {
      // The caller's plain writes before run() must be seen by the workers, and theirs by it.
      const int64_t base = run * 3;
      pool.run([&](int ith, int nt) {
        const auto [b, e] = cpu::split_range(n, ith, nt);
        for (int64_t i = b; i < e; ++i) data[static_cast<size_t>(i)] = base + i;
      });
      int64_t sum = 0;
      for (int64_t v : data) sum += v;
      ASSERT_EQ(sum, base * n + n * (n - 1) / 2) << "nth=" << nth << " run=" << run;
    }
  }
}

TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(3);
  std::atomic<int> count{0};
  for (int round = 0; round < 5; ++round) {
    // Longer than the spin phase, so workers are asleep on the futex for the next run.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.run([&](int, int) { count.fetch_add(1, std::memory_order_relaxed); });
    EXPECT_EQ(count.load(), 3 * (round + 1));
  }
}

TEST(ThreadPool, ManyShortRunsStress) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  for (int run = 0; run < 5000; ++run) {
    pool.run([&](int ith, int) { total.fetch_add(ith + 1, std::memory_order_relaxed); });
  }
  EXPECT_EQ(total.load(), 5000 * 10);
}

TEST(ThreadPool, CreateAndDestroyRepeatedly) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    if (i % 2 == 0) {
      int calls = 0;
      std::atomic<int> seen{0};
      pool.run([&](int ith, int) {
        if (ith == 0) ++calls;
        seen.fetch_add(1);
      });
      EXPECT_EQ(calls, 1);
      EXPECT_EQ(seen.load(), pool.size());
    }
  }
}

// Turns order the threads of a run, and a turn sees the plain (non-atomic) writes of the turns
// before it: each thread appends its index to an unsynchronized vector in its turn, after an
// uneven amount of work, so without the ordering the appends would race and come out shuffled.
TEST(ThreadPool, TurnsRunInThreadOrder) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    for (int run = 0; run < 300; ++run) {
      cpu::Turns turns;
      std::vector<int> order;
      order.reserve(static_cast<size_t>(n));
      pool.run([&](int ith, int) {
        volatile int spin = 0;
        for (int i = 0; i < ((run + 7 * (n - ith)) % 5) * 200; ++i) spin = spin + 1;
        turns.wait(ith);
        order.push_back(ith);
        turns.done(ith);
      });
      ASSERT_EQ(order.size(), static_cast<size_t>(n)) << "run " << run;
      for (int i = 0; i < n; ++i) ASSERT_EQ(order[static_cast<size_t>(i)], i) << "run " << run;
    }
  }
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool pool(0), Error); }

TEST(ThreadPool, RunRangesCoversEachIndexOnceAndRethrows) {
  for (const int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      run_ranges(pool, n, [&](int64_t first, int64_t last) {
        ASSERT_LT(first, last);
        for (int64_t i = first; i < last; ++i) seen[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << i;
    }
    // Every range throws; one error comes back, and the pool stays usable.
    EXPECT_THROW(run_ranges(pool, 10, [](int64_t, int64_t) { fail("range failed"); }), Error);
    std::atomic<int64_t> total{0};
    run_ranges(pool, 10, [&](int64_t first, int64_t last) { total += last - first; });
    EXPECT_EQ(total.load(), 10);
  }
}

}  // namespace
}  // namespace hearth
