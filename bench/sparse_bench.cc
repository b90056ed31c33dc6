// The sparse FFN operators at decode (one token, memory-bound): gather_matmul over the active rows
// of ffn_up [n_ff, n_embd] and sparse_axpy over the active rows of the neuron-major ffn_down
// [n_ff, n_embd], at Llama-like n_embd 2048 / n_ff 5632. Bytes/s counts the weight bytes of the
// active rows only, so a kernel that keeps the DRAM bandwidth of dense matvec at every density
// turns sparsity into speed one for one. Active neurons are a uniform random subset (no
// locality: the hardest case for prefetchers), drawn anew for each of kSets calls, or, with
// contiguous = 1, one run of as many consecutive rows at a random start: the same bytes, so the
// two show what scattering alone costs. Args: {density in percent, threads, contiguous}.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/cpu/context.h"
#include "bench_util.h"
#include "ops/matmul.h"
#include "ops/sparse_matmul.h"

namespace hearth::bench {
namespace {

constexpr int64_t kEmbd = 2048, kFf = 5632;

// Active sets per call cycle through this many random draws: with the weight copies they make
// far more distinct (copy, set) pairs than L3 holds, so even 5% of the rows stream from DRAM.
constexpr int kSets = 16;

std::vector<int32_t> active_neurons(int64_t percent, bool contiguous, uint32_t seed) {
  const int64_t count = std::max<int64_t>(1, kFf * percent / 100);
  std::mt19937 rng(seed);
  std::vector<int32_t> rows(static_cast<size_t>(contiguous ? count : kFf));
  if (contiguous) {
    const auto start = static_cast<int32_t>(rng() % static_cast<uint32_t>(kFf - count + 1));
    std::iota(rows.begin(), rows.end(), start);
    return rows;
  }
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(static_cast<size_t>(count));
  std::sort(rows.begin(), rows.end());
  return rows;
}

template <typename Op>
void run_sparse(benchmark::State& state, DType t, const Op& op) {
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const WeightSet& w = cached_weights(t, kFf, kEmbd, kColdBytes);
  std::vector<std::vector<int32_t>> sets;
  for (uint32_t k = 0; k < kSets; ++k) {
    sets.push_back(active_neurons(state.range(0), state.range(2) != 0, k));
  }
  const auto n_idx = static_cast<int64_t>(sets[0].size());
  // Activations for gather_matmul, coefficients for sparse_axpy (non-zero: every row is read).
  const auto x = random_activations(kEmbd, 1);
  const auto a = random_activations(n_idx, 2);
  std::vector<float> y(static_cast<size_t>(std::max(kEmbd, n_idx)));
  size_t i = 0;
  for (auto _ : state) {
    op(ctx, w.get(i), sets[i % kSets], x.data(), a.data(), y.data());
    ++i;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n_idx * row_bytes(t, kEmbd));
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

void bm_gather_matmul(benchmark::State& state, DType t) {
  run_sparse(state, t,
             [t](cpu::CpuContext& ctx, const uint8_t* w, const std::vector<int32_t>& idx,
                 const float* x, const float*, float* y) {
               gather_matmul(ctx, t, w, kFf, kEmbd, idx.data(), static_cast<int64_t>(idx.size()), x,
                             1, y);
             });
}

void bm_sparse_axpy(benchmark::State& state, DType t) {
  run_sparse(state, t,
             [t](cpu::CpuContext& ctx, const uint8_t* w, const std::vector<int32_t>& idx,
                 const float*, const float* a, float* y) {
               sparse_axpy(ctx, t, w, kFf, kEmbd, idx.data(), static_cast<int64_t>(idx.size()), a,
                           1, y);
             });
}

// A decode step through a float input-major copy [kEmbd inputs, cols outputs] (model-wide
// thresholds: cols 5632 as ffn_up's copy, 2048 as attn_output's): lane_matvec over a random
// `density`% of the inputs, whose sums are the dense matvec's bits, its rows lane-grouped (as the
// models' copies are) or in input order. Bytes/s counts the active rows, as above.
void bm_lane_matvec(benchmark::State& state, DType t) {
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const int64_t cols = state.range(3);
  const WeightSet& w = cached_weights(t, kEmbd, cols, kColdBytes);
  std::vector<std::vector<int32_t>> sets;
  for (uint32_t k = 0; k < kSets; ++k) {
    std::mt19937 rng(k);
    std::vector<int32_t> rows;
    for (int32_t j = 0; j < kEmbd; ++j) {
      if (static_cast<int64_t>(rng() % 100) < state.range(0)) rows.push_back(j);
    }
    sets.push_back(std::move(rows));
  }
  const auto a = random_activations(kEmbd, 2);
  std::vector<float> y(static_cast<size_t>(cols));
  int64_t rows_read = 0;
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<int32_t>& idx = sets[i % kSets];
    lane_matvec(ctx, t, t, w.get(i), kEmbd, cols, idx.data(), static_cast<int64_t>(idx.size()),
                a.data(), y.data(), state.range(2) != 0);
    rows_read += static_cast<int64_t>(idx.size());
    ++i;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(rows_read * row_bytes(t, cols));
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

// A prompt through an input-major copy [kEmbd inputs, kFf outputs] (model-wide thresholds with
// sparse prompts): each of 128 tokens keeps a random `density`% of its inputs, through
// sparse_axpy_each; density 0 is the dense product of the row-major matrix instead (matmul), the
// prompt's other path. Items/s counts tokens. Args: {density in percent, threads}.
void bm_prompt_axpy_each(benchmark::State& state, DType t) {
  constexpr int64_t kTokens = 128;
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const int64_t percent = state.range(0);
  const WeightSet& w = cached_weights(t, percent == 0 ? kFf : kEmbd, percent == 0 ? kEmbd : kFf, 0);
  const auto x = random_activations(kTokens * kEmbd, 3);
  std::vector<int32_t> idx(static_cast<size_t>(kTokens * kEmbd));
  std::vector<float> a(idx.size());
  std::vector<int64_t> counts(kTokens);
  std::mt19937 rng(4);
  for (int64_t tok = 0; tok < kTokens; ++tok) {
    int64_t k = 0;
    for (int64_t j = 0; j < kEmbd; ++j) {
      if (static_cast<int64_t>(rng() % 100) >= percent) continue;
      idx[static_cast<size_t>(tok * kEmbd + k)] = static_cast<int32_t>(j);
      a[static_cast<size_t>(tok * kEmbd + k++)] = x[static_cast<size_t>(tok * kEmbd + j)];
    }
    counts[static_cast<size_t>(tok)] = k;
  }
  std::vector<float> y(static_cast<size_t>(kTokens * kFf));
  for (auto _ : state) {
    if (percent == 0) {
      matmul(ctx, t, w.get(0), kFf, kEmbd, x.data(), kTokens, y.data());
    } else {
      sparse_axpy_each(ctx, t, w.get(0), kEmbd, kFf, idx.data(), a.data(), kEmbd, counts.data(),
                       kTokens, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kTokens);
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

// A prompt's product of [kEmbd inputs, kFf outputs] for `tokens` tokens, dense: through the
// row-major matrix (matmul, copy 0) or through its lane-grouped input-major copy (lane_matmul,
// copy 1), the same bits. Items/s counts tokens. Args: {tokens, threads, copy}.
void bm_prompt_lane_matmul(benchmark::State& state, DType t) {
  const int64_t tokens = state.range(0);
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const bool copy = state.range(2) != 0;
  const WeightSet& w = cached_weights(t, copy ? kEmbd : kFf, copy ? kFf : kEmbd, 0);
  const auto x = random_activations(tokens * kEmbd, 3);
  std::vector<float> y(static_cast<size_t>(tokens * kFf));
  for (auto _ : state) {
    if (copy) {
      lane_matmul(ctx, t, t, w.get(0), kEmbd, kFf, x.data(), tokens, y.data(), true);
    } else {
      matmul(ctx, t, w.get(0), kFf, kEmbd, x.data(), tokens, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * tokens);
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

void sparse_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"density%", "threads", "contiguous"});
  for (int threads : {1, 2}) {
    for (int64_t percent : {100, 30, 10, 5}) b->Args({percent, threads, 0});
    b->Args({30, threads, 1});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(bm_gather_matmul, f16, DType::F16)->Apply(sparse_args);
BENCHMARK_CAPTURE(bm_gather_matmul, q4_0, DType::Q4_0)->Apply(sparse_args);
BENCHMARK_CAPTURE(bm_sparse_axpy, f16, DType::F16)->Apply(sparse_args);
BENCHMARK_CAPTURE(bm_lane_matvec, f16, DType::F16)
    ->ArgNames({"density%", "threads", "grouped", "cols"})
    ->ArgsProduct({{100, 90, 80, 70, 50, 20}, {1, 2}, {0, 1}, {2048, 2560, 5632}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_prompt_axpy_each, f16, DType::F16)
    ->ArgNames({"density%", "threads"})
    ->ArgsProduct({{0, 55, 80}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_prompt_lane_matmul, f16, DType::F16)
    ->ArgNames({"tokens", "threads", "copy"})
    ->ArgsProduct({{1, 5, 16, 128}, {1, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_sparse_axpy, q4_0, DType::Q4_0)->Apply(sparse_args);
// The types of a Q4_K_M file's FFN (its ffn_down_t included) and the neuron-major Q8_0 copy Hearth
// makes of a quantized ffn_down.
BENCHMARK_CAPTURE(bm_gather_matmul, q4_k, DType::Q4_K)->Apply(sparse_args);
BENCHMARK_CAPTURE(bm_sparse_axpy, q8_0, DType::Q8_0)->Apply(sparse_args);
BENCHMARK_CAPTURE(bm_sparse_axpy, q4_k, DType::Q4_K)->Apply(sparse_args);
BENCHMARK_CAPTURE(bm_sparse_axpy, q6_k, DType::Q6_K)->Apply(sparse_args);

}  // namespace
}  // namespace hearth::bench
