#include <gtest/gtest.h>

#include "backend/cpu/bandwidth.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"

namespace hearth::cpu {
namespace {

constexpr size_t kSmallArray = size_t{16} << 20;

// Any machine that runs the tests moves more than 0.1 GB/s and, with 16 MiB arrays that may partly
// sit in cache, less than 10 TB/s; outside that range the timing or the byte count is broken.
TEST(Bandwidth, TriadGivesAPlausibleFigure) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double gbs = measure_bandwidth_gbs(pool, kSmallArray, 2);
    EXPECT_GT(gbs, 0.1) << threads << " threads";
    EXPECT_LT(gbs, 10000.0) << threads << " threads";
  }
}

TEST(Bandwidth, RejectsBadArguments) {
  ThreadPool pool(2);
  EXPECT_THROW(measure_bandwidth_gbs(pool, kSmallArray, 0), Error);
  EXPECT_THROW(measure_bandwidth_gbs(pool, sizeof(float), 1), Error);
}

}  // namespace
}  // namespace hearth::cpu
