// The FFN's rules (sparse/neuron_rule.h) and pipeline (sparse/ffn_pipeline.h) on their own, on a
// small random f32 layer with odd sizes, against a plain scalar FFN written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "sparse/ffn_pipeline.h"
#include "sparse/neuron_rule.h"

namespace {

using hearth::Matrix;
using hearth::SparseMode;
using hearth::SparseStats;
using namespace hearth::sparse;

constexpr int64_t kEmbd = 19, kFf = 37, kHidden = 5, kTokens = 3;

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Matrix f32(const std::vector<float>& v, int64_t rows, int64_t cols) {
  return Matrix{hearth::DType::F32, v.data(), rows, cols};
}

float relu(float x) { return std::max(x, 0.0f); }

// y[rows] = m[rows, cols] · x[cols]
std::vector<float> product(const std::vector<float>& m, int64_t rows, int64_t cols,
                           const float* x) {
  std::vector<float> y(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += double(m[r * cols + c]) * x[c];
    y[r] = static_cast<float>(acc);
  }
  return y;
}

struct Layer {
  std::vector<float> gate = random_values(kFf * kEmbd, 1), up = random_values(kFf * kEmbd, 2),
                     down = random_values(kEmbd * kFf, 3), fc1 = random_values(kHidden * kEmbd, 4),
                     fc2 = random_values(kFf * kHidden, 5), down_t;
  Matrix mg, mu, md, mdt, m1, m2;
  FfnWeights w;

  Layer() {
    down_t.resize(down.size());
    for (int64_t i = 0; i < kFf; ++i) {
      for (int64_t j = 0; j < kEmbd; ++j) down_t[i * kEmbd + j] = down[j * kFf + i];
    }
    mg = f32(gate, kFf, kEmbd), mu = f32(up, kFf, kEmbd), md = f32(down, kEmbd, kFf);
    mdt = f32(down_t, kFf, kEmbd), m1 = f32(fc1, kHidden, kEmbd), m2 = f32(fc2, kFf, kHidden);
    w.gate = &mg, w.up = &mu, w.down = &md, w.down_t = &mdt, w.fc1 = &m1, w.fc2 = &m2;
  }

  // The reference: ReGLU activations of token x, and the output with only `keep(i)` neurons.
  std::vector<float> act(const float* x) const {
    const auto g = product(gate, kFf, kEmbd, x), u = product(up, kFf, kEmbd, x);
    std::vector<float> a(kFf);
    for (int64_t i = 0; i < kFf; ++i) a[i] = relu(g[i]) * u[i];
    return a;
  }
  template <typename Keep>
  std::vector<float> out(const float* x, Keep keep) const {
    std::vector<float> a = act(x);
    for (int64_t i = 0; i < kFf; ++i) {
      if (!keep(i)) a[i] = 0.0f;
    }
    return product(down, kEmbd, kFf, a.data());
  }
};

FfnShape shape() {
  FfnShape s;
  s.n_embd = kEmbd, s.n_ff = kFf, s.max_hidden = kHidden, s.n_batch = kTokens;
  s.act = hearth::Activation::Relu;
  return s;
}

void expect_near(const float* got, const std::vector<float>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(NeuronRule, OracleDecidesTheNonZeroGateActivations) {
  hearth::cpu::CpuContext ctx(1);
  Layer l;
  const auto x = random_values(kTokens * kEmbd, 9);
  FfnScratch s(shape(), FfnMode{SparseMode::Oracle});
  SparseStats stats;
  const Selection sel = make_neuron_rule(SparseMode::Oracle, false)
                            ->decide(ctx, shape(), layer_rule(SparseMode::Oracle, l.w), l.w, x.data(), x.data(), kTokens, s, stats);
  ASSERT_EQ(sel.kind, Selection::Kind::Activations);
  EXPECT_TRUE(sel.exact);
  EXPECT_EQ(stats.weight_bytes, l.mg.bytes());
  for (int64_t t = 0; t < kTokens; ++t) {
    const auto g = product(l.gate, kFf, kEmbd, x.data() + t * kEmbd);
    for (int64_t i = 0; i < kFf; ++i) {
      EXPECT_EQ(sel.fires(t, i, kFf), g[i] > 0.0f) << t << "," << i;
    }
  }
}

TEST(NeuronRule, ThresholdKeepsOnlyActivationsAboveIt) {
  hearth::cpu::CpuContext ctx(1);
  Layer l;
  l.w.threshold = 0.4f;
  l.w.down_threshold = 0.1f;
  const auto x = random_values(kEmbd, 10);
  FfnScratch s(shape(), FfnMode{SparseMode::Threshold});
  SparseStats stats;
  const Selection sel = make_neuron_rule(SparseMode::Threshold, false)
                            ->decide(ctx, shape(), layer_rule(SparseMode::Threshold, l.w), l.w, x.data(), x.data(), 1, s, stats);
  EXPECT_FALSE(sel.exact);
  EXPECT_EQ(sel.down_threshold, 0.1f);
  const auto g = product(l.gate, kFf, kEmbd, x.data());
  int fired = 0;
  for (int64_t i = 0; i < kFf; ++i) {
    EXPECT_EQ(sel.fires(0, i, kFf), relu(g[i]) > 0.4f) << i;
    fired += sel.fires(0, i, kFf);
  }
  EXPECT_GT(fired, 0);
  EXPECT_LT(fired, kFf);
}

TEST(NeuronRule, PredictorScoresAreTheTwoLayerProduct) {
  hearth::cpu::CpuContext ctx(1);
  Layer l;
  l.w.threshold = 0.05f;
  const auto p = random_values(kTokens * kEmbd, 11);
  FfnScratch s(shape(), FfnMode{SparseMode::Predictor});
  SparseStats stats;
  const Selection sel = make_neuron_rule(SparseMode::Predictor, false)
                            ->decide(ctx, shape(), layer_rule(SparseMode::Predictor, l.w), l.w, p.data(), p.data(), kTokens, s, stats);
  ASSERT_EQ(sel.kind, Selection::Kind::Scores);
  for (int64_t t = 0; t < kTokens; ++t) {
    auto h = product(l.fc1, kHidden, kEmbd, p.data() + t * kEmbd);
    for (float& v : h) v = relu(v);
    const auto score = product(l.fc2, kFf, kHidden, h.data());
    expect_near(sel.values + t * kFf, score, "score");
  }
}

// The values every rule decides by, the host's and a device's alike: each mode keeps only the
// thresholds it uses.
TEST(NeuronRule, LayerRuleKeepsTheThresholdsOfItsMode) {
  FfnWeights w;
  w.threshold = 0.25f;
  w.down_threshold = 0.125f;
  const LayerRule dense = layer_rule(SparseMode::Dense, w);
  EXPECT_EQ(dense.threshold, 0.0f);
  EXPECT_EQ(dense.down_threshold, 0.0f);
  const LayerRule oracle = layer_rule(SparseMode::Oracle, w);
  EXPECT_EQ(oracle.mode, SparseMode::Oracle);
  EXPECT_EQ(oracle.threshold, 0.25f);
  EXPECT_EQ(oracle.down_threshold, 0.0f);
  const LayerRule threshold = layer_rule(SparseMode::Threshold, w);
  EXPECT_EQ(threshold.threshold, 0.25f);
  EXPECT_EQ(threshold.down_threshold, 0.125f);
  const LayerRule predictor = layer_rule(SparseMode::Predictor, w);
  EXPECT_EQ(predictor.threshold, 0.25f);
  EXPECT_EQ(predictor.down_threshold, 0.0f);
}

TEST(NeuronRule, DenseSelectsEverything) {
  hearth::cpu::CpuContext ctx(1);
  Layer l;
  FfnScratch s(shape(), FfnMode{});
  SparseStats stats;
  const auto x = random_values(kEmbd, 12);
  const Selection sel =
      make_neuron_rule(SparseMode::Dense, false)->decide(ctx, shape(), layer_rule(SparseMode::Dense, l.w), l.w, x.data(), x.data(), 1,
                                                         s, stats);
  EXPECT_EQ(sel.kind, Selection::Kind::All);
  EXPECT_EQ(stats.weight_bytes, 0u);
}

// The pipeline follows any selection: ffn_sparse and ffn_dense both give the reference FFN with
// only the selected neurons, per token.
TEST(FfnPipeline, SparseAndDenseFollowASelection) {
  hearth::cpu::CpuContext ctx(2);
  Layer l;
  const auto x = random_values(kTokens * kEmbd, 13);
  // Neuron i fires for token t when (i + t) % 3 != 0, through a score selection.
  std::vector<float> score(kTokens * kFf);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t i = 0; i < kFf; ++i) score[t * kFf + i] = (i + t) % 3 ? 1.0f : -1.0f;
  }
  Selection sel;
  sel.kind = Selection::Kind::Scores;
  sel.values = score.data();
  sel.threshold = 0.0f;
  for (const bool sparse : {true, false}) {
    FfnScratch s(shape(), FfnMode{SparseMode::Predictor});
    SparseStats stats;
    std::vector<float> out(kTokens * kEmbd);
    const FfnGroup g{l.w, x.data(), x.data(), kTokens, out.data()};
    if (sparse) {
      ffn_sparse(ctx, shape(), g, sel, s, stats);
    } else {
      ffn_dense(ctx, shape(), nullptr, g, sel, s, stats);
    }
    uint64_t want_active = 0;
    for (int64_t t = 0; t < kTokens; ++t) {
      const auto want = l.out(x.data() + t * kEmbd, [&](int64_t i) { return (i + t) % 3 != 0; });
      expect_near(out.data() + t * kEmbd, want, sparse ? "sparse" : "dense");
      for (int64_t i = 0; i < kFf; ++i) want_active += (i + t) % 3 != 0;
    }
    EXPECT_EQ(stats.neurons_active, want_active) << sparse;
  }
}

// A neuron subset (a device computes the others): only the subset's neurons contribute.
TEST(FfnPipeline, SparseComputesOnlyTheSubset) {
  hearth::cpu::CpuContext ctx(1);
  Layer l;
  const std::vector<int32_t> subset = {1, 4, 5, 20, 36};
  l.w.neurons = subset.data();
  l.w.n_neurons = static_cast<int64_t>(subset.size());
  const auto x = random_values(kEmbd, 14);
  FfnScratch s(shape(), FfnMode{});
  SparseStats stats;
  std::vector<float> out(kEmbd);
  ffn_sparse(ctx, shape(), FfnGroup{l.w, x.data(), x.data(), 1, out.data()}, Selection{}, s,
             stats);
  const auto want = l.out(x.data(), [&](int64_t i) {
    return std::find(subset.begin(), subset.end(), i) != subset.end();
  });
  expect_near(out.data(), want, "subset");
  EXPECT_EQ(stats.neurons_active, subset.size());
}

// Threshold's second stage: activations at or below the down threshold skip their down row.
TEST(FfnPipeline, DownThresholdDropsSmallActivations) {
  hearth::cpu::CpuContext ctx(1);
  Layer l;
  l.w.down_threshold = 0.05f;
  const auto x = random_values(kEmbd, 15);
  FfnScratch s(shape(), FfnMode{SparseMode::Threshold});
  SparseStats stats;
  const Selection sel = make_neuron_rule(SparseMode::Threshold, false)
                            ->decide(ctx, shape(), layer_rule(SparseMode::Threshold, l.w), l.w, x.data(), x.data(), 1, s, stats);
  std::vector<float> out(kEmbd);
  ffn_sparse(ctx, shape(), FfnGroup{l.w, x.data(), x.data(), 1, out.data()}, sel, s, stats);
  const auto a = l.act(x.data());
  uint64_t kept = 0;
  for (const float v : a) kept += std::fabs(v) > 0.05f;
  const auto want = l.out(x.data(), [&](int64_t i) { return std::fabs(a[i]) > 0.05f; });
  expect_near(out.data(), want, "two-stage");
  EXPECT_EQ(stats.neurons_active, kept);
  EXPECT_GT(kept, 0u);
}

}  // namespace
