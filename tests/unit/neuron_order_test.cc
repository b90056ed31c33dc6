// Neurons held most-active first (model/neuron_order.h, LoadOptions::reorder_neurons): the same
// model function in every mode, every FFN matrix permuted consistently, ffn_down and the
// observers still in the file's order, for mapped files and files read into memory alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "model/neuron_order.h"
#include "model/synth.h"

namespace hearth {
namespace {

std::string sparse_model(DType type) {
  return test::write_skewed_sparse_model(
      type, test::temp_dir() + "/order-" + std::string(dtype_name(type)) + ".gguf");
}

// The same file without ffn_down_t, so sparse sessions transpose ffn_down themselves.
std::string without_down_t(const std::string& src) {
  const auto in = gguf::GgufFile::open(src);
  gguf::GgufWriter w;
  for (const auto& [key, value] : in->metadata()) w.copy_value(key, value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    if (t.name.find("ffn_down_t") != std::string::npos) continue;
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims), t.data, t.nbytes);
  }
  const std::string dst = src + ".no-down-t.gguf";
  w.write(dst);
  return dst;
}

std::shared_ptr<const Model> load(const std::string& path, bool reorder, bool mmap) {
  LoadOptions o;
  o.weights = mmap ? WeightLoad::Map : WeightLoad::Read;
  o.reorder_neurons = reorder;
  return Model::load(path, o);
}

struct Outcome {
  std::vector<float> logits;  // after a prompt and four decode steps
  SparseStats stats;
};

Outcome run(const std::shared_ptr<const Model>& m, SparseMode mode, int threads = 2) {
  SessionOptions o;
  o.sparse = mode;
  o.n_ctx = 64;
  o.n_threads = threads;
  Session s(m, o);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11};
  auto out = s.eval(prompt);
  for (int i = 0; i < 4; ++i) {
    const int32_t t = static_cast<int32_t>(std::max_element(out.begin(), out.end()) - out.begin());
    out = s.eval({&t, 1});
  }
  return {{out.begin(), out.end()}, s.sparse_stats()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(NeuronOrder, SortsByFallingFrequencyKeepingTies) {
  EXPECT_EQ(frequency_order({0.1f, 0.9f, 0.5f, 0.9f}), (std::vector<int32_t>{1, 3, 2, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(frequency_order({nan, 0.2f, 0.3f}), (std::vector<int32_t>{2, 1, 0}));
  EXPECT_TRUE(frequency_order({0.9f, 0.5f, 0.5f, 0.1f}).empty());  // already in order
  EXPECT_TRUE(frequency_order({}).empty());
}

TEST(NeuronOrder, MatricesArePermutedTogether) {
  const std::string path = sparse_model(DType::F32);
  const auto file = load(path, false, true);
  for (const bool mmap : {true, false}) {
    SCOPED_TRACE(mmap ? "mapped" : "read");
    const auto m = load(path, true, mmap);
    const Model::Impl& r = m->impl();
    ASSERT_EQ(r.neuron_order.size(), 3u);
    for (size_t il = 0; il < 3; ++il) {
      const std::vector<int32_t>& order = r.neuron_order[il];
      ASSERT_EQ(order.size(), 352u) << "a skewed layer is not in frequency order in the file";
      const std::vector<float> freq = layer_frequency(r, il);
      for (size_t j = 1; j < order.size(); ++j) EXPECT_GE(freq[j - 1], freq[j]);
      const LayerWeights& a = r.weights.layers[il];
      const LayerWeights& b = file->impl().weights.layers[il];
      for (const int64_t j : {int64_t{0}, int64_t{1}, int64_t{200}, int64_t{351}}) {
        const int64_t i = order[static_cast<size_t>(j)];
        EXPECT_EQ(std::memcmp(a.ffn_gate.row(j), b.ffn_gate.row(i), a.ffn_gate.bytes() / 352), 0);
        EXPECT_EQ(std::memcmp(a.ffn_up.row(j), b.ffn_up.row(i), a.ffn_up.bytes() / 352), 0);
        EXPECT_EQ(std::memcmp(a.ffn_down_t.row(j), b.ffn_down_t.row(i), a.ffn_down_t.bytes() / 352),
                  0);
        EXPECT_EQ(std::memcmp(a.fc2.row(j), b.fc2.row(i), a.fc2.bytes() / 352), 0);
      }
      // ffn_down keeps the file's columns (and, for a mapped file, its bytes).
      EXPECT_EQ(std::memcmp(a.ffn_down.data, b.ffn_down.data, a.ffn_down.bytes()), 0);
    }
  }
}

TEST(NeuronOrder, ModelWithoutFrequenciesKeepsFileOrder) {
  const std::string path = test::temp_dir() + "/order-plain.gguf";
  write_synthetic_model(test::tiny_synth_options(DType::F32, FfnActivation::Relu), path);
  const auto m = load(path, true, false);
  for (size_t il = 0; il < m->impl().weights.layers.size(); ++il) {
    EXPECT_EQ(m->impl().order(il), nullptr);
  }
}

TEST(NeuronOrder, DenseIsTheSameBitsAndSparseModesTheSameFunction) {
  for (const DType type : {DType::F32, DType::Q4_0}) {
    const std::string path = sparse_model(type);
    const auto file = load(path, false, true);
    for (const bool mmap : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + (mmap ? " mapped" : " read"));
      const auto m = load(path, true, mmap);
      // Dense: ffn_down reads the activations back in file order, so nothing changes.
      EXPECT_EQ(run(m, SparseMode::Dense).logits, run(file, SparseMode::Dense).logits);
      for (const SparseMode mode : {SparseMode::Oracle, SparseMode::Predictor}) {
        SCOPED_TRACE(to_string(mode));
        const Outcome a = run(m, mode), b = run(file, mode);
        // The same neurons fire; only the order of the down projection's sum changes, and for
        // Q4_0 which neurons share the int8 coefficient scales of the one-token axpy (a
        // quantization error of the size the axpy has against dense; logits are of order 1).
        EXPECT_EQ(a.stats.neurons_active, b.stats.neurons_active);
        EXPECT_LT(max_abs_diff(a.logits, b.logits), type == DType::Q4_0 ? 0.1f : 1e-3f);
      }
    }
  }
}

TEST(NeuronOrder, TransposedDownFollowsTheOrder) {
  const std::string path = without_down_t(sparse_model(DType::F32));
  const auto m = load(path, true, true);
  ASSERT_NE(m->impl().order(0), nullptr);
  ASSERT_FALSE(m->impl().weights.layers[0].ffn_down_t.present());
  const Outcome a = run(m, SparseMode::Predictor);
  const Outcome b = run(load(path, false, true), SparseMode::Predictor);
  EXPECT_EQ(a.stats.neurons_active, b.stats.neurons_active);
  EXPECT_LT(max_abs_diff(a.logits, b.logits), 1e-3f);
}

// Records what the observer sees of layer 1.
class Recorder : public FfnObserver {
 public:
  void observe(int32_t layer, int64_t n, const float*, const float* act, const float* h) override {
    if (layer != 1) return;
    acts.insert(acts.end(), act, act + n * 352);
    hs.insert(hs.end(), h, h + n * 352);
  }
  std::vector<float> acts, hs;
};

TEST(NeuronOrder, ObserverSeesTheFileOrder) {
  const std::string path = sparse_model(DType::F32);
  Recorder a, b;
  for (auto [m, rec] : {std::pair{load(path, true, false), &a}, {load(path, false, true), &b}}) {
    SessionOptions o;
    o.sparse = SparseMode::Dense;
    o.n_ctx = 32;
    o.ffn_observer = rec;
    Session s(m, o);
    s.eval(std::vector<int32_t>{1, 5, 9, 200});
  }
  ASSERT_EQ(a.acts.size(), 4u * 352);
  EXPECT_EQ(a.acts, b.acts);
  EXPECT_EQ(a.hs, b.hs);
}

}  // namespace
}  // namespace hearth
