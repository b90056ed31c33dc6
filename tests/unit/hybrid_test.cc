// Hybrid execution against the CPU stand-in device (DESIGN.md section 6): the placement, the
// hot/cold split of each FFN layer, attention on the device, the concurrent run and the merge are
// all tested without a GPU. Hybrid output must equal single-device output (up to the summation
// order of the two partial FFN outputs), and the device never holds more than its budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "device/standin/standin_device.h"
#include "common/test_util.h"
#include "core/error.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "model/synth.h"

namespace hearth {
namespace {

// A small ReGLU model with predictors and measured firing frequencies (blk.N.ffn_act_freq).
const std::string& sparse_model() {
  static const std::string path =
      test::write_skewed_sparse_model(DType::F32, test::temp_dir() + "/hybrid-relu.gguf");
  return path;
}

LoadOptions standin(double budget_gib, SparseMode mode, const std::string& placement = "neurons") {
  LoadOptions o;
  o.device.device = "standin";
  o.device.standin_gib = 1.0;
  o.device.vram_budget_gib = budget_gib;
  o.device.placement = placement;
  o.device.n_ctx = 64;
  o.device.n_batch = 16;
  o.device.sparse = mode;
  o.device.reset_gpu_index = true;  // each test solves for itself
  return o;
}

SessionOptions session_options(SparseMode mode) {
  SessionOptions o;
  o.sparse = mode;
  o.n_ctx = 64;
  o.n_batch = 16;
  o.n_threads = 2;
  return o;
}

struct Generation {
  std::vector<int32_t> tokens;  // greedy continuation
  std::vector<float> logits;    // after the last one
  SparseStats stats;
};

// A prompt in one batch (host FFN, device attention), then greedy decode one token at a time
// (split FFN).
Generation generate(const std::shared_ptr<const Model>& m, SparseMode mode, int n = 20) {
  Session s(m, session_options(mode));
  std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11};
  auto out = s.eval(prompt);
  Generation r;
  for (int i = 0; i < n; ++i) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(out.begin(), out.end()) - out.begin());
    r.tokens.push_back(next);
    out = s.eval({&next, 1});
  }
  r.logits.assign(out.begin(), out.end());
  r.stats = s.sparse_stats();
  return r;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

uint64_t model_bytes(const std::shared_ptr<const Model>& m) { return m->weight_bytes_per_token(); }

// A budget in GiB for `share` of the model's weights on the device, on top of the activation
// buffers the placement sets aside first (as model_device.cc sizes them for standin()).
double budget_for(const std::shared_ptr<const Model>& m, double share) {
  backend::DeviceSessionOptions so;
  so.n_ctx = 64;
  so.n_batch = 16;
  so.predictor_width = m->impl().weights.layers.front().fc1.rows;
  for (const LayerWeights& l : m->impl().weights.layers) {
    so.predictor_width = std::max(so.predictor_width, l.fc1.rows);
  }
  const uint64_t scratch = backend::StandinDevice(1 << 30, 1).session_scratch_bytes(m->config(), so);
  return (static_cast<double>(model_bytes(m)) * share + static_cast<double>(scratch)) / (1 << 30);
}

// The mode, and whether the hybrid model holds its neurons most-active first.
class HybridModes : public ::testing::TestWithParam<std::tuple<SparseMode, bool>> {};

TEST_P(HybridModes, SplitEqualsSingleDevice) {
  const auto [mode, reorder] = GetParam();
  const auto cpu = Model::load(sparse_model());
  const Generation ref = generate(cpu, mode);
  // A third of the model: attention of every layer and part of each FFN on the device.
  const double budget = budget_for(cpu, 1.0 / 3);
  LoadOptions o = standin(budget, mode);
  o.reorder_neurons = reorder;
  const auto hyb = Model::load(sparse_model(), o);
  ASSERT_FALSE(hyb->device_name().empty()) << hyb->placement_note();
  const Model::Impl& mi = hyb->impl();
  int split_layers = 0;
  for (size_t il = 0; il < mi.device_hot.size(); ++il) {
    EXPECT_TRUE(mi.device_attention[il]) << "layer " << il;
    split_layers += mi.device_hot[il] > 0 && mi.device_hot[il] < mi.config.n_ff;
  }
  EXPECT_GT(split_layers, 0) << hyb->placement_note();
  if (reorder) {
    // Most-active first: the device's neurons are the front of each layer, the host's the rest.
    for (size_t il = 0; il < mi.cold.size(); ++il) {
      if (mi.cold[il].empty()) continue;
      EXPECT_EQ(mi.cold[il].front(), mi.device_hot[il]) << "layer " << il;
      EXPECT_EQ(mi.cold[il].back(), mi.config.n_ff - 1) << "layer " << il;
    }
  }

  const Generation got = generate(hyb, mode);
  EXPECT_EQ(got.tokens, ref.tokens) << to_string(mode);
  EXPECT_LT(max_abs_diff(got.logits, ref.logits), 1e-3f) << to_string(mode);
  // The same neurons were computed, wherever they ran.
  EXPECT_EQ(got.stats.neurons_total, ref.stats.neurons_total);
  EXPECT_EQ(got.stats.neurons_active, ref.stats.neurons_active);
  EXPECT_LE(hyb->device_peak_allocated(), static_cast<uint64_t>(budget * (1 << 30)));
}

INSTANTIATE_TEST_SUITE_P(Modes, HybridModes,
                         ::testing::Combine(::testing::Values(SparseMode::Dense,
                                                              SparseMode::Oracle,
                                                              SparseMode::Predictor),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "Reordered" : "");
                         });

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
      << "largest difference " << max_abs_diff(got, want);
}

// Batch invariance holds in hybrid sessions too: a prompt's FFN splits between the device's hot
// neurons and the host's cold ones as a decode step's does, so every position's logits are the
// same bits at -b 1 and -b 16.
TEST(Hybrid, SparsePromptsAreBatchInvariant) {
  const auto cpu = Model::load(sparse_model());
  const double budget = budget_for(cpu, 1.0 / 3);
  for (const SparseMode mode : {SparseMode::Oracle, SparseMode::Predictor}) {
    SCOPED_TRACE(to_string(mode));
    const auto hyb = Model::load(sparse_model(), standin(budget, mode));
    ASSERT_FALSE(hyb->device_name().empty()) << hyb->placement_note();
    std::vector<int32_t> prompt = {1};
    for (int i = 1; i < 30; ++i) prompt.push_back(2 + (i * 37) % 250);
    const auto logits = [&](int32_t n_batch) {
      SessionOptions o = session_options(mode);
      o.n_batch = n_batch;
      Session s(hyb, o);
      std::vector<float> out(prompt.size() * static_cast<size_t>(hyb->config().n_vocab));
      s.eval_all(prompt, out);
      return out;
    };
    expect_same_bits(logits(1), logits(16));
  }
}

// With dense prompts a prompt marked as one stays on the host's dense kernels however it is cut
// into passes, and the decode steps after it split as always: the same bits at -b 3 and -b 16.
TEST(Hybrid, DensePromptsInPiecesOfAnySize) {
  const auto cpu = Model::load(sparse_model());
  const auto hyb =
      Model::load(sparse_model(), standin(budget_for(cpu, 1.0 / 3), SparseMode::Predictor));
  ASSERT_FALSE(hyb->device_name().empty()) << hyb->placement_note();
  std::vector<int32_t> prompt = {1};
  for (int i = 1; i < 30; ++i) prompt.push_back(2 + (i * 37) % 250);
  const auto logits = [&](int32_t n_batch) {
    SessionOptions o = session_options(SparseMode::Predictor);
    o.sparse_prompt = false;
    o.n_batch = n_batch;
    Session s(hyb, o);
    const auto first = s.eval_prompt(prompt);
    std::vector<float> out(first.begin(), first.end());
    for (const int32_t t : {7, 99, 3}) {
      const auto l = s.eval({&t, 1});
      out.insert(out.end(), l.begin(), l.end());
    }
    return out;
  };
  expect_same_bits(logits(3), logits(16));
}

TEST(Hybrid, LayerOffloadEqualsSingleDevice) {
  const auto cpu = Model::load(sparse_model());
  const Generation ref = generate(cpu, SparseMode::Dense);
  const double budget = budget_for(cpu, 0.5);
  const auto hyb = Model::load(sparse_model(), standin(budget, SparseMode::Dense, "layers"));
  const Model::Impl& mi = hyb->impl();
  ASSERT_TRUE(hyb->device_name().size()) << hyb->placement_note();
  EXPECT_EQ(mi.device_hot.front(), mi.config.n_ff);  // whole layers
  EXPECT_EQ(mi.device_hot.back(), 0);
  const Generation got = generate(hyb, SparseMode::Dense);
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_LT(max_abs_diff(got.logits, ref.logits), 1e-3f);
}

TEST(Hybrid, NeverOverBudget) {
  const auto cpu = Model::load(sparse_model());
  for (const double share : {0.0, 0.05, 0.2, 0.45, 0.7, 1.0, 1.5}) {
    for (const SparseMode mode : {SparseMode::Dense, SparseMode::Predictor}) {
      const double budget = budget_for(cpu, share);
      const auto m = Model::load(sparse_model(), standin(budget, mode));
      {
        Session s(m, session_options(mode));
        const std::vector<int32_t> toks = {1, 2, 3, 4, 5};
        s.eval(toks);
        s.eval({toks.data(), 1});
      }
      EXPECT_LE(m->device_peak_allocated(), static_cast<uint64_t>(budget * (1 << 30)))
          << share << " " << to_string(mode) << ": " << m->placement_note();
    }
  }
}

TEST(Hybrid, TinyBudgetRunsOnTheCpuWithAMessage) {
  const auto cpu = Model::load(sparse_model());
  const Generation ref = generate(cpu, SparseMode::Predictor, 5);
  const auto m = Model::load(sparse_model(), standin(1e-6, SparseMode::Predictor));
  EXPECT_TRUE(m->device_name().empty());
  EXPECT_NE(m->placement_note().find("CPU"), std::string::npos) << m->placement_note();
  EXPECT_EQ(generate(m, SparseMode::Predictor, 5).tokens, ref.tokens);
}

TEST(Hybrid, BudgetAboveFreeMemoryIsRefused) {
  try {
    Model::load(sparse_model(), standin(2.0, SparseMode::Dense));  // the stand-in has 1 GiB
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("free memory"), std::string::npos) << e.what();
  }
}

TEST(Hybrid, TraceShowsBothSides) {
  const auto cpu = Model::load(sparse_model());
  const double budget = budget_for(cpu, 1.0 / 3);
  const auto m = Model::load(sparse_model(), standin(budget, SparseMode::Predictor));
  SessionOptions o = session_options(SparseMode::Predictor);
  o.trace = true;
  Session s(m, o);
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6};
  for (const int32_t& t : toks) s.eval({&t, 1});
  const std::string path = test::temp_dir() + "/trace.json";
  s.write_trace(path);
  const std::string json = test::read_file(path);
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("ffn (hot neurons)"), std::string::npos);
  EXPECT_NE(json.find("ffn (cold neurons)"), std::string::npos);
  EXPECT_GT(s.device_busy_fraction(), 0.0);
  Session untraced(m, session_options(SparseMode::Predictor));
  EXPECT_THROW(untraced.write_trace(path), Error);
}

TEST(Hybrid, PlacementIsCachedBesideTheModel) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/cached.gguf";
  test::write_file(path, test::read_file(sparse_model()));
  const auto cpu = Model::load(path);
  const double budget = budget_for(cpu, 1.0 / 3);
  LoadOptions o = standin(budget, SparseMode::Predictor);
  o.device.reset_gpu_index = false;
  const auto first = Model::load(path, o);
  EXPECT_NE(first->placement_note().find("saved"), std::string::npos) << first->placement_note();
  const auto second = Model::load(path, o);
  EXPECT_NE(second->placement_note().find("cached"), std::string::npos) << second->placement_note();
  EXPECT_EQ(first->impl().device_hot, second->impl().device_hot);
  o.device.reset_gpu_index = true;
  const auto reset = Model::load(path, o);
  EXPECT_NE(reset->placement_note().find("saved"), std::string::npos) << reset->placement_note();
  // Another budget is another key.
  o.device.reset_gpu_index = false;
  o.device.vram_budget_gib = budget / 2;
  const auto other = Model::load(path, o);
  EXPECT_NE(other->placement_note().find("saved"), std::string::npos) << other->placement_note();
}

TEST(Hybrid, DisableGpuIndexKeepsTheFfnOnTheHost) {
  const auto cpu = Model::load(sparse_model());
  const Generation ref = generate(cpu, SparseMode::Predictor, 8);
  LoadOptions o = standin(0.5, SparseMode::Predictor);
  o.device.disable_gpu_index = true;
  const auto m = Model::load(sparse_model(), o);
  for (const int64_t h : m->impl().device_hot) EXPECT_EQ(h, 0);
  EXPECT_EQ(generate(m, SparseMode::Predictor, 8).tokens, ref.tokens);
}

// Several sequences in one forward pass (continuous batching): attention per sequence on the
// device, the union of their neurons split between the device and the host.
TEST(Hybrid, BatchedSequencesEqualSingleDevice) {
  const auto cpu = Model::load(sparse_model());
  LoadOptions lo = standin(budget_for(cpu, 1.0 / 2), SparseMode::Predictor);
  lo.device.n_seq = 3;
  const auto hyb = Model::load(sparse_model(), lo);
  ASSERT_FALSE(hyb->device_name().empty()) << hyb->placement_note();
  const auto run = [](const std::shared_ptr<const Model>& m) {
    SessionOptions o = session_options(SparseMode::Predictor);
    o.n_seq = 3;
    Session s(m, o);
    const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9}, {2, 40, 41, 42, 43}, {7}};
    std::vector<float> logits(3 * static_cast<size_t>(m->config().n_vocab));
    std::vector<int32_t> next(3);
    std::vector<SeqTokens> batch;
    for (int32_t q = 0; q < 3; ++q) batch.push_back({q, prompts[static_cast<size_t>(q)]});
    std::vector<int32_t> out;
    for (int step = 0; step < 12; ++step) {
      s.eval_batch(batch, logits);
      batch.clear();
      for (int32_t q = 0; q < 3; ++q) {
        const float* l = logits.data() + q * m->config().n_vocab;
        next[static_cast<size_t>(q)] =
            static_cast<int32_t>(std::max_element(l, l + m->config().n_vocab) - l);
        out.push_back(next[static_cast<size_t>(q)]);
      }
      for (int32_t q = 0; q < 3; ++q) batch.push_back({q, {&next[static_cast<size_t>(q)], 1}});
    }
    return out;
  };
  EXPECT_EQ(run(hyb), run(cpu));
  // A session with more sequences than the placement left room for is refused.
  SessionOptions o = session_options(SparseMode::Predictor);
  o.n_seq = 4;
  EXPECT_THROW(Session(hyb, o), Error);
}

TEST(Hybrid, SessionContextBeyondThePlacementIsRefused) {
  const auto m = Model::load(sparse_model(), standin(0.5, SparseMode::Dense));
  SessionOptions o = session_options(SparseMode::Dense);
  o.n_ctx = 128;
  EXPECT_THROW(Session(m, o), Error);
}

TEST(Hybrid, CliRunsOnTheStandin) {
  const auto r = test::run_hearth({"run", "-m", sparse_model(), "-p", "ab", "-n", "8", "--temp",
                                   "0", "--device", "standin", "--standin-vram", "0.5",
                                   "--vram-budget", "0.001", "-c", "64", "--reset-gpu-index"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stand-in"), std::string::npos) << r.err;
  const auto cpu = test::run_hearth(
      {"run", "-m", sparse_model(), "-p", "ab", "-n", "8", "--temp", "0", "--device", "none"});
  EXPECT_EQ(r.out, cpu.out);
  test::expect_clean_error(
      test::run_hearth({"run", "-m", sparse_model(), "-p", "ab", "--device", "standin",
                        "--standin-vram", "0.5", "--vram-budget", "3"}),
      "free memory");
  test::expect_clean_error(
      test::run_hearth({"run", "-m", sparse_model(), "-p", "ab", "--device", "cuda"}), "CUDA");
}

}  // namespace
}  // namespace hearth
