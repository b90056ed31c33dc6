// The machine's roofline and the pool's fixed cost: a STREAM-like triad and a read-only sweep
// over the same thread pool the kernels use, the read bandwidth of a random share of a matrix's
// rows (the ceiling of every sparse product), and the latency of an empty ThreadPool::run().
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
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

// Read-only over a random share of the rows of a matrix (rows of range(1) bytes, ascending), the
// access pattern of a sparse product's weights without its arithmetic: each thread takes half of
// the list, 8 rows at a time, line by line across them, prefetching the same line of the next 8
// rows (of the patterns tried, the fastest: docs/benchmarks.md). Each iteration reads another of
// kRegions copies of the matrix, so that no row is still in cache from an earlier one. Density
// 100 is the sequential read of every row in the same pattern. Bytes/s counts the rows read.
void bm_scattered_read(benchmark::State& state) {
  constexpr int kRows = 8;
  // 1 GiB in all: a 10% share of 7 other copies (90 MiB) is read before a copy comes round again,
  // more than an L3 holds.
  constexpr int64_t kRegions = 8;
  const int64_t percent = state.range(0), row = state.range(1);
  const auto nth = static_cast<int>(state.range(2));
  cpu::ThreadPool pool(nth);
  const int64_t region_floats = kStreamFloats;
  // Filled once for every instance of this benchmark.
  static const Buffer b = [] {
    Buffer all(static_cast<float*>(
        std::aligned_alloc(64, static_cast<size_t>(kRegions * region_floats) * sizeof(float))));
    std::fill(all.get(), all.get() + kRegions * region_floats, 1.0f);
    return all;
  }();
  const int64_t row_floats = row / int64_t{sizeof(float)};
  const int64_t rows = region_floats / row_floats;
  std::vector<int64_t> idx;
  std::mt19937 rng(static_cast<uint32_t>(percent));
  for (int64_t r = 0; r < rows; ++r) {
    if (static_cast<int64_t>(rng() % 100) < percent) idx.push_back(r);
  }
  const auto n = static_cast<int64_t>(idx.size());
  std::vector<float> sums(static_cast<size_t>(nth) * 16);
  int64_t iteration = 0;
  for (auto _ : state) {
    const float* base = b.get() + iteration++ % kRegions * region_floats;
    pool.run([&](int ith, int nth_) {
      const auto [begin, end] = cpu::split_range(n, ith, nth_);
      float lanes[16] = {};
      for (int64_t j = begin; j < end; j += kRows) {
        const int64_t count = std::min<int64_t>(kRows, end - j);
        const int64_t ahead = std::min<int64_t>(kRows, std::max<int64_t>(0, end - j - kRows));
        for (int64_t f = 0; f < row_floats; f += 16) {
          for (int64_t r = 0; r < ahead; ++r) {
            __builtin_prefetch(base + idx[j + kRows + r] * row_floats + f, 0, 3);
          }
          for (int64_t r = 0; r < count; ++r) {
            const float* line = base + idx[j + r] * row_floats + f;
            for (int k = 0; k < 16; ++k) lanes[k] += line[k];
          }
        }
      }
      sums[static_cast<size_t>(ith) * 16] = lanes[0] + lanes[15];
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * n * row);
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
// Rows of 1152 bytes (2048 Q4_0 weights: a Q4_0 copy's wo row, a Q4_K ffn_up row), 3168 (5632
// Q4_0 weights) and 11264 (5632 F16 weights).
BENCHMARK(bm_scattered_read)
    ->ArgNames({"density%", "row_bytes", "threads"})
    ->ArgsProduct({{100, 60, 30, 10}, {1152, 3168, 11264}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_pool_run)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace hearth::bench
