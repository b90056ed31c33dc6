// One layer's predictor-driven sparse FFN for one decode token, fused (ops/sparse_ffn.h: one pool
// pass after fc1) against the unfused sequence the executor ran before (fc2 scores, selection,
// gather of up and gate, activation, chunked axpy over down_t, each its own pool pass), on the
// same cold weights and the same active neurons, at Llama-like n_embd 2048 / n_ff 5632 with a
// predictor of width 256. Compare the two in one run, interleaved, since this machine is noisy:
//   hearth_microbench --benchmark_filter=bm_ffn_step --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// Args: {density in percent, threads}.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>

#include "backend/cpu/context.h"
#include "bench_util.h"
#include "ops/activation.h"
#include "ops/sparse_ffn.h"
#include "ops/sparse_matmul.h"

namespace hearth::bench {
namespace {

constexpr int64_t kEmbd = 2048, kFf = 5632, kHidden = 256;

// Cold copies of [up; gate; down_t] stacked as one [3 n_ff, n_embd] matrix, and of fc2.
struct Layers {
  DType type;
  WeightSet ffn, fc2;
  std::vector<float> h, x;
  std::vector<int32_t> all;
  float threshold = 0.0f;

  Layers(DType t, int64_t percent)
      : type(t),
        ffn(t, 3 * kFf, kEmbd, kColdBytes),
        fc2(DType::F16, kFf, kHidden, kColdBytes / 4),
        x(random_activations(kEmbd, 1)),
        all(static_cast<size_t>(kFf)) {
    h = random_activations(kHidden, 2);
    for (float& v : h) v = std::max(v, 0.0f);
    std::iota(all.begin(), all.end(), 0);
    // The threshold that lets `percent` of the neurons fire.
    cpu::CpuContext ctx(1);
    std::vector<float> s(static_cast<size_t>(kFf));
    gather_matmul(ctx, DType::F16, fc2.get(0), kFf, kHidden, all.data(), kFf, h.data(), 1,
                  s.data());
    std::sort(s.begin(), s.end());
    threshold = s[static_cast<size_t>(kFf - kFf * percent / 100)];
  }
  SparseFfnLayer layer(size_t i) const {
    const size_t stride = static_cast<size_t>(kFf * row_bytes(type, kEmbd));
    const uint8_t* w = ffn.get(i);
    SparseFfnLayer f;
    f.fc2 = {DType::F16, fc2.get(i), kFf, kHidden};
    f.up = {type, w, kFf, kEmbd};
    f.gate = {type, w + stride, kFf, kEmbd};
    f.down_t = {type, w + 2 * stride, kFf, kEmbd};
    f.cand = all.data();
    f.n_cand = kFf;
    f.threshold = threshold;
    f.act = Activation::Relu;
    return f;
  }
};

// One Layers per (type, density), kept for the whole run: interleaved repetitions alternate
// between them, and making one costs seconds.
const Layers& layers(DType t, int64_t percent) {
  static std::map<std::pair<DType, int64_t>, std::unique_ptr<Layers>> made;
  auto& l = made[{t, percent}];
  if (!l) l = std::make_unique<Layers>(t, percent);
  return *l;
}

void bm_ffn_step_fused(benchmark::State& state, DType t) {
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const Layers& l = layers(t, state.range(0));
  SparseFfnWorkspace ws;
  ws.reserve(kEmbd, kFf, kHidden);
  std::vector<float> y(kEmbd);
  size_t i = 0;
  for (auto _ : state) {
    sparse_ffn_decode(ctx, l.layer(i++), l.h.data(), l.x.data(), ws, y.data());
    benchmark::DoNotOptimize(y.data());
  }
}

void bm_ffn_step_unfused(benchmark::State& state, DType t) {
  cpu::CpuContext ctx(static_cast<int>(state.range(1)));
  const Layers& l = layers(t, state.range(0));
  std::vector<float> score(kFf), u(kFf), g(kFf), y(kEmbd);
  std::vector<int32_t> idx(kFf);
  size_t i = 0;
  for (auto _ : state) {
    const SparseFfnLayer f = l.layer(i++);
    gather_matmul(ctx, DType::F16, f.fc2.data, kFf, kHidden, l.all.data(), kFf, l.h.data(), 1,
                  score.data());
    int64_t k = 0;
    for (int32_t n = 0; n < kFf; ++n) {
      if (score[n] >= l.threshold) idx[k++] = n;
    }
    gather_matmul2(ctx, t, f.up.data, f.gate.data, kFf, kEmbd, idx.data(), k, l.x.data(), 1,
                   u.data(), g.data());
    glu(ctx, Activation::Relu, g.data(), u.data(), k, u.data());
    sparse_axpy(ctx, t, f.down_t.data, kFf, kEmbd, idx.data(), k, u.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
  }
}

void step_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"density%", "threads"});
  for (int threads : {1, 2}) {
    for (int64_t percent : {30, 10, 5}) b->Args({percent, threads});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(bm_ffn_step_fused, f16, DType::F16)->Apply(step_args);
BENCHMARK_CAPTURE(bm_ffn_step_unfused, f16, DType::F16)->Apply(step_args);
BENCHMARK_CAPTURE(bm_ffn_step_fused, q4_0, DType::Q4_0)->Apply(step_args);
BENCHMARK_CAPTURE(bm_ffn_step_unfused, q4_0, DType::Q4_0)->Apply(step_args);

}  // namespace
}  // namespace hearth::bench
