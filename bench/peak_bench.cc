// The compute side of the roofline: the arithmetic peak of the cores the prompt kernels run on,
// against which `hearth bench`'s prompt GFLOP/s is read. Each thread runs independent chains of
// FP32 FMAs or of 8-bit multiply-adds (VNNI's vpdpbusd), 256- and 512-bit, enough
// chains to cover the instructions' latency, so the figure is issue-bound. Counted as operations:
// an FMA lane is 2 FLOP, a vpdpbusd lane 4 multiplies and 4 adds.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace hearth::bench {
namespace {

constexpr int kChains = 12;     // more than latency x issue width of every x86 FMA unit
constexpr int64_t kSteps = 1 << 16;  // per thread and call

// Each returns a value built from every chain so none can be dropped.
__attribute__((target("avx2,fma"))) float fma_chains_256(float seed) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < kSteps; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) float fma_chains_512(float seed) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < kSteps; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx512f,avx512vl,avx512vnni"))) float vnni_chains_256(float seed) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(static_cast<int>(seed) + c);
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < kSteps; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_dpbusd_epi32(acc[c], u, s);
  }
  __m256i t = acc[0];
  for (int c = 1; c < kChains; ++c) t = _mm256_add_epi32(t, acc[c]);
  return static_cast<float>(_mm256_extract_epi32(t, 0));
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) float vnni_chains_512(float seed) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(static_cast<int>(seed) + c);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < kSteps; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], u, s);
  }
  __m512i t = acc[0];
  for (int c = 1; c < kChains; ++c) t = _mm512_add_epi32(t, acc[c]);
  // (The masked extract: GCC 12's unmasked ones trip -Wuninitialized.)
  return static_cast<float>(_mm_cvtsi128_si32(_mm512_maskz_extracti32x4_epi32(0xf, t, 0)));
}

enum class Unit { Fma256, Fma512, Vnni256, Vnni512 };

bool is_vnni(Unit u) { return u == Unit::Vnni256 || u == Unit::Vnni512; }
bool is_512(Unit u) { return u == Unit::Fma512 || u == Unit::Vnni512; }

float run_chains(Unit unit, float seed) {
  switch (unit) {
    case Unit::Fma256:
      return fma_chains_256(seed);
    case Unit::Fma512:
      return fma_chains_512(seed);
    case Unit::Vnni256:
      return vnni_chains_256(seed);
    case Unit::Vnni512:
      return vnni_chains_512(seed);
  }
  return 0.0f;
}

void bm_peak(benchmark::State& state, Unit unit) {
  const bool supported = unit == Unit::Fma256   ? __builtin_cpu_supports("fma") != 0
                         : unit == Unit::Fma512 ? __builtin_cpu_supports("avx512f") != 0
                                                : __builtin_cpu_supports("avx512vnni") != 0 &&
                                                      __builtin_cpu_supports("avx512bw") != 0;
  if (!supported) {
    state.SkipWithError("this CPU lacks the instructions");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  cpu::ThreadPool pool(threads);
  std::vector<float> out(static_cast<size_t>(threads) * 16);
  for (auto _ : state) {
    pool.run([&](int ith, int) {
      const float seed = static_cast<float>(ith);
      out[static_cast<size_t>(ith) * 16] = run_chains(unit, seed);
    });
    benchmark::DoNotOptimize(out.data());
  }
  const int64_t lanes = is_512(unit) ? 16 : 8;
  const int64_t ops_per_lane = is_vnni(unit) ? 8 : 2;
  const double ops = static_cast<double>(state.iterations()) * threads * kSteps * kChains * lanes *
                     ops_per_lane;
  state.counters["Gop/s"] = benchmark::Counter(ops / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(bm_peak, fma256, Unit::Fma256)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(bm_peak, fma512, Unit::Fma512)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(bm_peak, vnni256, Unit::Vnni256)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_peak, vnni512, Unit::Vnni512)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime();

}  // namespace
}  // namespace hearth::bench
