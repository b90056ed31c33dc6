// The machine's roofline and the pool's fixed cost: a STREAM-like triad and a read-only sweep
// over the same thread pool the kernels use, and the latency of an empty ThreadPool::run().
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/thread_pool.h"
#include "bench_util.h"

namespace hearth::bench {
namespace {

constexpr int64_t kStreamFloats = int64_t{32} << 20;  // 128 MiB per array

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;

Buffer make_buffer(float value) {
  Buffer b(static_cast<float*>(std::aligned_alloc(64, kStreamFloats * sizeof(float))));
  for (int64_t i = 0; i < kStreamFloats; ++i) b[i] = value;
  return b;
}

// a = b + s * c; counts 3 arrays of traffic like STREAM (the write-allocate read is not counted).
void bm_stream_triad(benchmark::State& state) {
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  Buffer a = make_buffer(0), b = make_buffer(1), c = make_buffer(2);
  for (auto _ : state) {
    pool.run([&](int ith, int nth) {
      const auto [begin, end] = cpu::split_range(kStreamFloats, ith, nth);
      for (int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * kStreamFloats * int64_t{sizeof(float)});
}

// Read-only: the access pattern of matvec.
void bm_stream_read(benchmark::State& state) {
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  Buffer b = make_buffer(1);
  std::vector<float> sums(static_cast<size_t>(state.range(0)) * 16);
  for (auto _ : state) {
    pool.run([&](int ith, int nth) {
      const auto [begin, end] = cpu::split_range(kStreamFloats / 8, ith, nth);
      float lanes[8] = {};
      for (int64_t i = begin * 8; i < end * 8; i += 8) {
        for (int j = 0; j < 8; ++j) lanes[j] += b[i + j];
      }
      sums[static_cast<size_t>(ith) * 16] = lanes[0] + lanes[7];
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * kStreamFloats * int64_t{sizeof(float)});
}

void bm_pool_run(benchmark::State& state) {
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<int> touched(static_cast<size_t>(state.range(0)) * 16);
  for (auto _ : state) {
    pool.run([&](int ith, int) { ++touched[static_cast<size_t>(ith) * 16]; });
  }
  benchmark::DoNotOptimize(touched.data());
}

BENCHMARK(bm_stream_triad)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_stream_read)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_pool_run)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace hearth::bench
