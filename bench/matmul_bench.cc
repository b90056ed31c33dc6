// matvec (decode, memory-bound: bytes/s of weights is the figure of merit) and matmul (prompt
// processing, compute-bound: FLOP/s) for every dtype at Llama-7B-like shapes scaled to 2048, and
// the q, k, v projections of one decode step, separate or as one matmul_parts.
// The block types (Q4_1 ... IQ4_XS) run matvec at a decode-like 4096 x 4096, against Q4_0 and
// Q8_0 at the same shape.
// Args: {rows, cols, threads} for matvec, {rows, cols, tokens, threads} for matmul.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "backend/cpu/context.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels/row_groups.h"
#include "bench_util.h"
#include "ops/matmul.h"

namespace hearth::bench {
namespace {

// Cold copies of a random weight matrix of a block type, made without a quantizer: random bytes
// with bit 6 of every byte clear, so each f16 factor (whose bit 14 that is) is finite. Matvec's
// speed does not depend on the values.
struct RandomBlockSet {
  std::vector<std::vector<uint8_t>> copies;
  size_t matrix_bytes = 0;
  const uint8_t* get(size_t i) const { return copies[i % copies.size()].data(); }
};
const RandomBlockSet& random_block_weights(DType t, int64_t rows, int64_t cols) {
  static std::tuple<DType, int64_t, int64_t> key;
  static std::unique_ptr<RandomBlockSet> set;
  if (!set || key != std::make_tuple(t, rows, cols)) {
    set = std::make_unique<RandomBlockSet>();
    key = {t, rows, cols};
    set->matrix_bytes = static_cast<size_t>(rows * row_bytes(t, cols));
    std::vector<uint8_t> first(set->matrix_bytes);
    std::mt19937 rng(7);
    for (auto& b : first) b = static_cast<uint8_t>(rng() & 0xbf);
    const size_t n = (kColdBytes + set->matrix_bytes - 1) / set->matrix_bytes;
    set->copies.assign(n, first);
  }
  return *set;
}

// With `groups`, the matrix is taken as row groups (matmul_row_groups; its bytes random, as
// the other block figures' are).
// Whether this level has row groups for t; otherwise the benchmark is skipped, saying so.
bool has_row_groups(const cpu::CpuContext& ctx, DType t, benchmark::State& state) {
  if (ctx.kernels().weights(t).gemm_row_groups) return true;
  state.SkipWithError("no row groups for this type at this ISA level");
  return false;
}

template <typename Weights>
void run_matvec(benchmark::State& state, DType t, const Weights& w, bool groups = false) {
  const int64_t rows = state.range(0), cols = state.range(1);
  cpu::CpuContext ctx(static_cast<int>(state.range(2)));
  if (groups && !has_row_groups(ctx, t, state)) return;
  const auto x = random_activations(cols, 1);
  std::vector<float> y(static_cast<size_t>(rows));
  size_t i = 0;
  for (auto _ : state) {
    if (groups) {
      const MatmulPart part{w.get(i++), rows, y.data()};
      matmul_row_groups(ctx, t, cols, {&part, 1}, x.data(), 1);
    } else {
      matvec(ctx, t, w.get(i++), rows, cols, x.data(), y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.matrix_bytes));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

void bm_matvec(benchmark::State& state, DType t) {
  run_matvec(state, t, cached_weights(t, state.range(0), state.range(1), kColdBytes));
}
void bm_matvec_blocks(benchmark::State& state, DType t) {
  run_matvec(state, t, random_block_weights(t, state.range(0), state.range(1)));
}
void bm_matvec_groups(benchmark::State& state, DType t) {
  run_matvec(state, t, random_block_weights(t, state.range(0), state.range(1)), true);
}

// Products of n tokens; with `cold` the matrices cycle through kColdBytes so the weights stream
// from DRAM as in decode.
void run_matmul(benchmark::State& state, DType t, bool cold, bool groups = false) {
  const int64_t rows = state.range(0), cols = state.range(1), n = state.range(2);
  cpu::CpuContext ctx(static_cast<int>(state.range(3)));
  if (groups && !has_row_groups(ctx, t, state)) return;
  const WeightSet& w = cached_weights(t, rows, cols, cold ? kColdBytes : 0);
  const auto x = random_activations(n * cols, 2);
  std::vector<float> y(static_cast<size_t>(rows * n));
  size_t i = 0;
  for (auto _ : state) {
    if (groups) {
      const MatmulPart part{w.get(i++), rows, y.data()};
      matmul_row_groups(ctx, t, cols, {&part, 1}, x.data(), n);
    } else {
      matmul(ctx, t, w.get(i++), rows, cols, x.data(), n, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.matrix_bytes));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols * n),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

// Prompt processing, compute-bound: one matrix is enough, the cache state hardly matters.
void bm_matmul(benchmark::State& state, DType t) { run_matmul(state, t, false); }
// The same over row groups (the matrix's bytes taken as groups: its values do not matter here).
void bm_matmul_groups(benchmark::State& state, DType t) { run_matmul(state, t, false, true); }

// Few tokens (batched decode of a few sequences): the weights stream from DRAM as in matvec, but
// each byte meets n tokens, so past a few tokens the kernel's FLOP/s decides.
void bm_matmul_small(benchmark::State& state, DType t) { run_matmul(state, t, true); }

// A decode step's q, k and v projections (a 1B Llama's 2048 + 256 + 256 rows x 2048, the three
// matrices views of one cold copy): three matvecs (shared = 0) against one matmul_parts over
// them (shared = 1), which converts x and wakes the pool once. Same bytes either way.
void bm_qkv(benchmark::State& state, DType t) {
  constexpr int64_t kQ = 2048, kKv = 256, kCols = 2048;
  const bool shared = state.range(0) != 0;
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const WeightSet& w = cached_weights(t, kQ + 2 * kKv, kCols, kColdBytes);
  const auto x = random_activations(kCols, 3);
  std::vector<float> y(static_cast<size_t>(kQ + 2 * kKv));
  const size_t ldw = static_cast<size_t>(row_bytes(t, kCols));
  size_t i = 0;
  for (auto _ : state) {
    const uint8_t* wq = w.get(i++);
    const MatmulPart parts[] = {{wq, kQ, y.data()},
                                {wq + kQ * ldw, kKv, y.data() + kQ},
                                {wq + (kQ + kKv) * ldw, kKv, y.data() + kQ + kKv}};
    if (shared) {
      matmul_parts(ctx, t, kCols, parts, x.data(), 1);
    } else {
      for (const MatmulPart& p : parts) matvec(ctx, t, p.w, p.rows, kCols, x.data(), p.y);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.matrix_bytes));
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

// One thread's gemm kernel on hot operands: `rows` x `cols` weights against `tokens` activation
// rows, all in cache, with no thread pool, DRAM or page walks in the way.
// With `groups`, the weights are taken as row groups (gemm_row_groups).
void run_hot_gemm(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t tokens,
                  bool groups = false) {
  cpu::CpuContext ctx(1);
  if (groups && !has_row_groups(ctx, t, state)) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(t);
  const WeightSet& w = cached_weights(t, rows, cols, 0);
  const auto x = random_activations(tokens * cols, 2);
  const size_t ldx = k.to_act ? cpu::act_row_bytes(k.act, cols) : cols * sizeof(float);
  // 64-byte aligned, as CpuContext::scratch hands activation rows to the kernels in a model.
  std::vector<uint8_t> xa_store(ldx * tokens + 64);
  uint8_t* xa = xa_store.data() + (64 - reinterpret_cast<uintptr_t>(xa_store.data()) % 64) % 64;
  for (int64_t t0 = 0; t0 < tokens; ++t0) {
    if (k.to_act) {
      k.to_act(x.data() + t0 * cols, xa + t0 * ldx, cols);
    } else {
      std::memcpy(xa + t0 * ldx, x.data() + t0 * cols, ldx);
    }
  }
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  const auto ldw = static_cast<size_t>(row_bytes(t, cols));
  for (auto _ : state) {
    if (groups) {
      k.gemm_row_groups(cols, w.get(0), ldw, rows / cpu::kGroupRows, xa, ldx, tokens, y.data(),
                        rows);
    } else {
      k.gemm(cols, w.get(0), ldw, rows, xa, ldx, tokens, y.data(), rows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.matrix_bytes));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols * tokens,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpu::isa_name(ctx.isa())));
}

// The prompt tiles on operands resident in L1 (8 rows x 1024 columns against 8 tokens, a few
// KiB each): the tile code's own arithmetic rate. Set against bm_peak, it tells how much of a
// prompt's shortfall is the tiles' instruction mix and how much is where their operands come
// from.
void bm_gemm_l1(benchmark::State& state, DType t) { run_hot_gemm(state, t, 8, 1024, 8); }

// A prompt's product on operands resident in L2 (64 rows x 1024 columns against 64 tokens): the
// many-token tiles' own rate, as bm_gemm_l1 measures the few-token ones.
void bm_gemm_l2_tokens(benchmark::State& state, DType t) { run_hot_gemm(state, t, 64, 1024, 64); }

// Decode's one-token product on weights resident in L2 (128 rows x 2048 columns: 64-512 KiB by
// type): the bytes per second the kernel can consume when memory is not the limit. Set against
// bm_matvec's cold figures and bm_stream_read, it tells whether a type's decode is bound by its
// instructions or by DRAM.
void bm_gemv_l2(benchmark::State& state, DType t) { run_hot_gemm(state, t, 128, 2048, 1); }
// The same, and bm_gemm_l2_tokens' shape, over row groups.
void bm_gemv_l2_groups(benchmark::State& state, DType t) {
  run_hot_gemm(state, t, 128, 2048, 1, true);
}
void bm_gemm_l2_groups(benchmark::State& state, DType t) {
  run_hot_gemm(state, t, 64, 1024, 64, true);
}

void matvec_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads"});
  // Outputs of attn_output / q|k|v / ffn_up over a 2048-wide residual (the ~1B model's).
  for (int64_t rows : {2048, 2560, 5632}) {
    for (int threads : {1, 2}) b->Args({rows, 2048, threads});
  }
  // Predictor shapes (fc1 [H, n_embd], fc2 [n_ff, H]): few or short rows.
  for (int threads : {1, 2}) {
    b->Args({256, 2048, threads});
    b->Args({5632, 256, threads});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// Decode of a 7B-like layer: 4096 x 4096.
void decode_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads"});
  for (int threads : {1, 2}) b->Args({4096, 4096, threads});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void qkv_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shared", "threads"});
  for (int threads : {1, 2}) {
    for (int shared : {0, 1}) b->Args({shared, threads});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void matmul_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "n", "threads"});
  b->Args({2048, 2048, 512, 2});
  b->Args({5632, 2048, 512, 2});
  b->Args({2048, 5632, 512, 2});
  b->Args({2048, 2048, 32, 2});
  b->Args({2048, 2048, 8, 2});
  b->Args({2048, 2048, 16, 2});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void matmul_small_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "n", "threads"});
  for (int64_t rows : {2048, 5632}) {
    for (int64_t n : {1, 2, 4, 8}) {
      for (int threads : {1, 2}) b->Args({rows, 2048, n, threads});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(bm_matvec, f32, DType::F32)->Apply(matvec_args);
BENCHMARK_CAPTURE(bm_matvec, f16, DType::F16)->Apply(matvec_args);
BENCHMARK_CAPTURE(bm_matvec, bf16, DType::BF16)->Apply(matvec_args);
BENCHMARK_CAPTURE(bm_matvec, q8_0, DType::Q8_0)->Apply(matvec_args);
BENCHMARK_CAPTURE(bm_matvec, q4_0, DType::Q4_0)->Apply(matvec_args);

BENCHMARK_CAPTURE(bm_matvec, q8_0_decode, DType::Q8_0)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec, q4_0_decode, DType::Q4_0)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q4_1, DType::Q4_1)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q5_0, DType::Q5_0)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q5_1, DType::Q5_1)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, iq4_nl, DType::IQ4_NL)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q2_k, DType::Q2_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q2_k, DType::Q2_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q3_k, DType::Q3_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q4_k, DType::Q4_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q5_k, DType::Q5_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, iq4_xs, DType::IQ4_XS)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q6_k, DType::Q6_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q4_0, DType::Q4_0)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q4_1, DType::Q4_1)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q5_0, DType::Q5_0)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, q5_1, DType::Q5_1)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_groups, iq4_nl, DType::IQ4_NL)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q3_k, DType::Q3_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q4_k, DType::Q4_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q5_k, DType::Q5_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, q6_k, DType::Q6_K)->Apply(decode_args);
BENCHMARK_CAPTURE(bm_matvec_blocks, iq4_xs, DType::IQ4_XS)->Apply(decode_args);

BENCHMARK_CAPTURE(bm_matmul, f32, DType::F32)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, f16, DType::F16)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, bf16, DType::BF16)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q8_0, DType::Q8_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q4_0, DType::Q4_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q4_1, DType::Q4_1)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q5_0, DType::Q5_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q5_1, DType::Q5_1)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, iq4_nl, DType::IQ4_NL)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q4_k, DType::Q4_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q5_k, DType::Q5_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, iq4_xs, DType::IQ4_XS)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q6_k, DType::Q6_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q2_k, DType::Q2_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul, q3_k, DType::Q3_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q2_k, DType::Q2_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q3_k, DType::Q3_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q4_k, DType::Q4_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q5_k, DType::Q5_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, iq4_xs, DType::IQ4_XS)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q6_k, DType::Q6_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q4_0, DType::Q4_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q4_1, DType::Q4_1)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q5_0, DType::Q5_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, q5_1, DType::Q5_1)->Apply(matmul_args);
BENCHMARK_CAPTURE(bm_matmul_groups, iq4_nl, DType::IQ4_NL)->Apply(matmul_args);

BENCHMARK_CAPTURE(bm_matmul_small, f16, DType::F16)->Apply(matmul_small_args);
BENCHMARK_CAPTURE(bm_matmul_small, q8_0, DType::Q8_0)->Apply(matmul_small_args);
BENCHMARK_CAPTURE(bm_matmul_small, q4_0, DType::Q4_0)->Apply(matmul_small_args);

BENCHMARK_CAPTURE(bm_gemm_l1, f16, DType::F16);
BENCHMARK_CAPTURE(bm_gemm_l1, q8_0, DType::Q8_0);
BENCHMARK_CAPTURE(bm_gemm_l1, q4_0, DType::Q4_0);
BENCHMARK_CAPTURE(bm_gemm_l1, q4_k, DType::Q4_K);
BENCHMARK_CAPTURE(bm_gemm_l1, q6_k, DType::Q6_K);

BENCHMARK_CAPTURE(bm_gemm_l2_tokens, f16, DType::F16);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q8_0, DType::Q8_0);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q4_0, DType::Q4_0);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q4_1, DType::Q4_1);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q5_0, DType::Q5_0);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q5_1, DType::Q5_1);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, iq4_nl, DType::IQ4_NL);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q2_k, DType::Q2_K);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q3_k, DType::Q3_K);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q4_k, DType::Q4_K);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q5_k, DType::Q5_K);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, q6_k, DType::Q6_K);
BENCHMARK_CAPTURE(bm_gemm_l2_tokens, iq4_xs, DType::IQ4_XS);
BENCHMARK_CAPTURE(bm_gemv_l2, f16, DType::F16);
BENCHMARK_CAPTURE(bm_gemv_l2, q8_0, DType::Q8_0);
BENCHMARK_CAPTURE(bm_gemv_l2, q4_0, DType::Q4_0);
BENCHMARK_CAPTURE(bm_gemv_l2, q4_1, DType::Q4_1);
BENCHMARK_CAPTURE(bm_gemv_l2, q5_0, DType::Q5_0);
BENCHMARK_CAPTURE(bm_gemv_l2, q5_1, DType::Q5_1);
BENCHMARK_CAPTURE(bm_gemv_l2, iq4_nl, DType::IQ4_NL);
BENCHMARK_CAPTURE(bm_gemv_l2, q2_k, DType::Q2_K);
BENCHMARK_CAPTURE(bm_gemv_l2, q3_k, DType::Q3_K);
BENCHMARK_CAPTURE(bm_gemv_l2, q4_k, DType::Q4_K);
BENCHMARK_CAPTURE(bm_gemv_l2, q5_k, DType::Q5_K);
BENCHMARK_CAPTURE(bm_gemv_l2, q6_k, DType::Q6_K);
BENCHMARK_CAPTURE(bm_gemv_l2, iq4_xs, DType::IQ4_XS);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q2_k, DType::Q2_K);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q3_k, DType::Q3_K);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q4_k, DType::Q4_K);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q5_k, DType::Q5_K);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, iq4_xs, DType::IQ4_XS);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q6_k, DType::Q6_K);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q4_0, DType::Q4_0);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q4_1, DType::Q4_1);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q5_0, DType::Q5_0);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, q5_1, DType::Q5_1);
BENCHMARK_CAPTURE(bm_gemv_l2_groups, iq4_nl, DType::IQ4_NL);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q2_k, DType::Q2_K);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q3_k, DType::Q3_K);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q4_k, DType::Q4_K);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q5_k, DType::Q5_K);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, iq4_xs, DType::IQ4_XS);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q6_k, DType::Q6_K);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q4_0, DType::Q4_0);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q4_1, DType::Q4_1);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q5_0, DType::Q5_0);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, q5_1, DType::Q5_1);
BENCHMARK_CAPTURE(bm_gemm_l2_groups, iq4_nl, DType::IQ4_NL);

BENCHMARK_CAPTURE(bm_qkv, f16, DType::F16)->Apply(qkv_args);
BENCHMARK_CAPTURE(bm_qkv, q4_0, DType::Q4_0)->Apply(qkv_args);

}  // namespace
}  // namespace hearth::bench
