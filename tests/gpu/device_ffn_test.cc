// CudaDevice's hot FFN (ffn_begin / ffn_end) against FfnExecutor on a model made of the same hot
// neurons: every mode, the weight types, gated and ungated FFNs, dReLU, biases, 1 to 8 tokens.
// Thresholds are picked in gaps of the host's values, so both sides make the same decisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "gpu_test_util.h"
#include "model/config.h"
#include "ops/linear.h"
#include "test_model.h"

namespace hearth::test {
namespace {

constexpr int64_t kLayer = 1;  // the layer under test; layer 0 gets other thresholds

struct FfnCase {
  SparseMode mode;
  DType type;
  FfnActivation act;
  bool gated = true;
  bool up_relu = false;
  bool biases = false;
  bool down_threshold = false;
};

std::string label(const FfnCase& c, size_t k, int64_t n) {
  return to_string(c.mode) + " " + std::string(dtype_name(c.type)) + " " + to_string(c.act) +
         (c.gated ? " gated" : " ungated") + (c.up_relu ? " dReLU" : "") +
         (c.biases ? " biases" : "") + (c.down_threshold ? " down-threshold" : "") + " k " +
         std::to_string(k) + " n " + std::to_string(n);
}

std::vector<FfnCase> cases() {
  std::vector<FfnCase> out;
  using A = FfnActivation;
  for (const DType t : kAllTypes) {
    out.push_back({SparseMode::Dense, t, A::Silu});
    out.push_back({SparseMode::Oracle, t, A::Relu});
  }
  out.push_back({SparseMode::Dense, DType::F32, A::Gelu});
  out.push_back({SparseMode::Dense, DType::F32, A::Relu2});
  out.push_back({SparseMode::Dense, DType::F16, A::Relu, false, false, true});
  out.push_back({SparseMode::Oracle, DType::F16, A::Relu, false, false, true});
  out.push_back({SparseMode::Oracle, DType::F32, A::Relu, true, true});
  // Threshold and Predictor decide on magnitudes: float weights, whose host kernels do not
  // quantize activations, so that both sides' values agree far below the threshold gaps.
  for (const DType t : {DType::F32, DType::F16, DType::BF16}) {
    out.push_back({SparseMode::Threshold, t, A::Silu});
    out.push_back({SparseMode::Threshold, t, A::Silu, true, false, false, true});
    out.push_back({SparseMode::Predictor, t, A::Relu});
  }
  out.push_back({SparseMode::Threshold, DType::F32, A::Gelu, false, false, true});
  out.push_back({SparseMode::Predictor, DType::F16, A::Relu, false, false, true});
  out.push_back({SparseMode::Predictor, DType::F32, A::Relu, true, true});
  return out;
}

// The host's values the thresholds are chosen from: |act(gate)| (or |act(up)|) of every token
// and hot neuron, then |act(gate) · up'| of those above the first threshold; or the predictor's
// scores.
struct Thresholds {
  float threshold = 0.0f;
  float down_threshold = 0.0f;
};

Thresholds pick_thresholds(const FfnCase& c, const ModelConfig& config, const sparse::FfnWeights& w,
                           const float* xn, const float* p, int64_t n) {
  cpu::CpuContext ctx(1, cpu::Isa::Scalar);
  const int64_t k = w.up->rows;
  Thresholds t;
  if (c.mode == SparseMode::Predictor) {
    std::vector<float> hidden(n * w.fc1->rows), score(n * k);
    linear(ctx, *w.fc1, p, n, hidden.data());
    for (float& v : hidden) v = v > 0.0f ? v : 0.0f;
    linear(ctx, *w.fc2, hidden.data(), n, score.data());
    t.threshold = gap_threshold(score);
    return t;
  }
  if (c.mode != SparseMode::Threshold) return t;
  std::vector<float> g(n * k), u(n * k);
  linear(ctx, *w.up, xn, n, u.data());
  add_bias(ctx.isa(), u.data(), w.up_bias, n, k);
  if (c.gated) {
    linear(ctx, *w.gate, xn, n, g.data());
  } else {
    g = u;
  }
  activate(ctx.isa(), to_activation(config.ffn_act), g.data(), n * k, g.data());
  std::vector<float> mags;
  for (const float v : g) mags.push_back(std::fabs(v));
  t.threshold = gap_threshold(mags);
  if (c.down_threshold) {
    std::vector<float> products;
    for (int64_t i = 0; i < n * k; ++i) {
      const float up = config.ffn_up_relu && u[i] < 0.0f ? 0.0f : u[i];
      if (std::fabs(g[i]) > t.threshold) products.push_back(std::fabs(c.gated ? g[i] * up : g[i]));
    }
    if (products.size() >= 2) t.down_threshold = gap_threshold(products);
  }
  return t;
}

// The weight bytes the device reads for n tokens, by its own accounting (hot_ffn.cc): the
// deciding matrix in full (gate, or up without a gate; the predictor), then the rows of the
// neurons some token selects (k_union) of up (and gate), and of down_t those rows, or with two
// stages the rows some token passes on (k_down). The host reads each token's down rows on their
// own and only where its coefficient is not zero, so its count differs from n > 1 on; the
// selections are the host's values against the same thresholds.
uint64_t device_weight_bytes(const FfnCase& c, const ModelConfig& config,
                             const sparse::FfnWeights& w, const float* xn, const float* p,
                             int64_t n, const Thresholds& th) {
  cpu::CpuContext ctx(1, cpu::Isa::Scalar);
  const int64_t k = w.up->rows;
  const auto rows = [](const Matrix* m, int64_t r) -> uint64_t {
    return m && m->present() ? static_cast<uint64_t>(r) * row_bytes(m->type, m->cols) : 0;
  };
  if (c.mode == SparseMode::Dense) return rows(w.gate, k) + rows(w.up, k) + rows(w.down_t, k);
  std::vector<float> u(n * k), g(n * k);
  linear(ctx, *w.up, xn, n, u.data());
  add_bias(ctx.isa(), u.data(), w.up_bias, n, k);
  std::vector<char> selected(k, 0), down(k, 0);
  if (c.mode == SparseMode::Predictor) {
    std::vector<float> hidden(n * w.fc1->rows);
    linear(ctx, *w.fc1, p, n, hidden.data());
    for (float& v : hidden) v = v > 0.0f ? v : 0.0f;
    linear(ctx, *w.fc2, hidden.data(), n, g.data());
    for (int64_t i = 0; i < n * k; ++i) selected[i % k] |= g[i] >= th.threshold;
    const int64_t ku = std::count(selected.begin(), selected.end(), 1);
    return w.fc1->bytes() + rows(w.fc2, k) + rows(w.up, ku) + rows(w.gate, ku) +
           rows(w.down_t, ku);
  }
  if (c.gated) {
    linear(ctx, *w.gate, xn, n, g.data());
  } else {
    g = u;
  }
  activate(ctx.isa(), to_activation(config.ffn_act), g.data(), n * k, g.data());
  const bool two = c.mode == SparseMode::Threshold && th.down_threshold > 0.0f;
  for (int64_t i = 0; i < n * k; ++i) {
    const bool fires = c.mode == SparseMode::Oracle ? g[i] != 0.0f : std::fabs(g[i]) > th.threshold;
    if (!fires) continue;
    selected[i % k] = 1;
    const float up = config.ffn_up_relu && u[i] < 0.0f ? 0.0f : u[i];
    if (two && std::fabs(c.gated ? g[i] * up : g[i]) > th.down_threshold) down[i % k] = 1;
  }
  const int64_t ku = std::count(selected.begin(), selected.end(), 1);
  const int64_t kd = two ? std::count(down.begin(), down.end(), 1) : ku;
  return (c.gated ? rows(w.gate, k) + rows(w.up, ku) : rows(w.up, k)) + rows(w.down_t, kd);
}

void run_case(const FfnCase& c, const std::vector<int32_t>& hot, int64_t n) {
  TestModelOptions o;
  o.type = c.type;
  o.act = c.act;
  o.gated = c.gated;
  o.up_relu = c.up_relu;
  o.biases = c.biases;
  const TestModel m(o);
  const ModelConfig& config = m.config();
  const std::string what = label(c, hot.size(), n);
  const auto xn = random_floats(n * o.n_embd, 101, 1.0f);
  const auto p = random_floats(n * o.n_embd, 102, 1.0f);
  const auto base = random_floats(n * o.n_embd, 103, 1.0f);

  HostHotFfn host(m, kLayer, hot, c.mode);
  const Thresholds th = pick_thresholds(c, config, host.weights(), xn.data(), p.data(), n);
  std::vector<float> want(base.size());
  SparseStats want_stats;
  host.run(xn.data(), p.data(), n, th.threshold, th.down_threshold, want.data(), want_stats);
  for (size_t i = 0; i < want.size(); ++i) want[i] += base[i];

  backend::DeviceSessionOptions so;
  so.mode = c.mode;
  // Layer 0's values would change every decision of layer 1 if the device read the wrong one.
  // The rules come from the host's factory, as a session's do.
  sparse::FfnWeights other, tested;
  other.threshold = other.down_threshold = 1e9f;
  tested.threshold = th.threshold;
  tested.down_threshold = th.down_threshold;
  so.rules = {sparse::layer_rule(c.mode, other), sparse::layer_rule(c.mode, tested)};
  GpuSession gpu =
      open_gpu_session(m.device_model(false, hot, c.mode == SparseMode::Predictor), so);
  backend::DeviceSession* session = gpu.session.get();
  std::vector<float> got = base;
  SparseStats got_stats;
  session->ffn_begin(kLayer, xn.data(), p.data(), n);
  session->ffn_end(got.data(), got_stats);

  const uint64_t want_bytes =
      device_weight_bytes(c, config, host.weights(), xn.data(), p.data(), n, th);
  expect_close_to_max(got, want, quantized(c.type) ? 2e-2 : 1e-4, what);
  if (quantized(c.type) && c.mode != SparseMode::Dense) {
    // The host quantizes activations to Q8_0, so a gate within that error of zero can fire on
    // one side only: a few neurons at most.
    const double slack = 0.03 * static_cast<double>(n * hot.size()) + 1;
    EXPECT_NEAR(static_cast<double>(got_stats.neurons_active),
                static_cast<double>(want_stats.neurons_active), slack)
        << what;
    EXPECT_NEAR(static_cast<double>(got_stats.weight_bytes), static_cast<double>(want_bytes),
                0.1 * static_cast<double>(want_bytes))
        << what;
  } else {
    EXPECT_EQ(got_stats.neurons_active, want_stats.neurons_active) << what;
    EXPECT_EQ(got_stats.weight_bytes, want_bytes) << what;
  }
  EXPECT_EQ(got_stats.neurons_total, 0u) << "neurons_total is the session's to count";
}

TEST(GpuDevice, HotFfnMatchesHostExecutor) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  std::vector<int32_t> some, all;
  for (int32_t i = 0; i < 96; ++i) {
    if (i % 3 != 1) some.push_back(i);
    all.push_back(i);
  }
  for (const FfnCase& c : cases()) {
    for (const auto* hot : {&some, &all}) {
      for (const int64_t n : {1, 3, 8}) run_case(c, *hot, n);
    }
  }
}

TEST(GpuDevice, LayerWithoutHotNeuronsAddsNothing) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const TestModel m(TestModelOptions{});
  backend::DeviceSessionOptions so;
  so.n_ctx = 8;
  so.n_batch = 1;
  GpuSession gpu = open_gpu_session(m.device_model(true, {}, false), so);
  backend::DeviceSession* session = gpu.session.get();
  const auto xn = random_floats(m.config().n_embd, 1, 1.0f);
  std::vector<float> out(xn.size(), 2.0f);
  SparseStats stats;
  session->ffn_begin(0, xn.data(), xn.data(), 1);
  session->ffn_end(out.data(), stats);
  EXPECT_EQ(out, std::vector<float>(xn.size(), 2.0f));
  EXPECT_EQ(stats.neurons_active, 0u);
  EXPECT_THROW(session->ffn_end(out.data(), stats), Error);  // no ffn_begin pending
}

}  // namespace
}  // namespace hearth::test
