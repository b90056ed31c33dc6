// Sparse inference end to end through the public API, on small ReGLU models made here: a plain
// Hearth file and its PowerInfer twin (magic PWRI, ffn_down stored transposed as ffn_down_t,
// predictors fc1/fc2 of a different width in every layer).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/synth.h"
#include "ops/vec.h"

namespace hearth {
namespace {

constexpr int64_t kLayers = 3;
constexpr int64_t kEmbd = 64;
constexpr int64_t kFf = 192;

std::string make_relu_model(const std::string& dir, DType type) {
  SynthOptions o;
  o.n_embd = kEmbd;
  o.n_layer = kLayers;
  o.n_ff = kFf;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_vocab = 300;
  o.n_ctx = 128;
  o.type = type;
  o.act = FfnActivation::Relu;
  const std::string path = dir + "/relu-" + std::string(dtype_name(type)) + ".gguf";
  write_synthetic_model(o, path);
  return path;
}

struct PwriOptions {
  bool transpose_down = true;
  bool predictors = true;
  bool drop_fc2_in_layer1 = false;
  bool wrong_fc2_width = false;
  float threshold = 0.0f;
};

// Rewrites a Hearth ReLU model the way PowerInfer's converter lays out its files.
std::string to_powerinfer(const std::string& src, const std::string& dst, const PwriOptions& po) {
  const auto in = gguf::GgufFile::open(src);
  gguf::GgufWriter w;
  for (const auto& [key, value] : in->metadata()) {
    if (key != "hearth.ffn_activation") w.copy_value(key, value);  // PWRI implies ReLU
  }
  w.set_f32("powerinfer.sparse_threshold", po.threshold);
  w.set_magic_powerinfer(true);
  std::vector<std::vector<uint8_t>> blobs;
  blobs.reserve(4 * kLayers);
  for (const gguf::TensorInfo& t : in->tensors()) {
    const bool is_down = t.name.find("ffn_down") != std::string::npos;
    if (!is_down || !po.transpose_down) {
      w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims), t.data, t.nbytes);
      continue;
    }
    // ffn_down ne {n_ff, n_embd} -> ffn_down_t ne {n_embd, n_ff}, row i = neuron i's column.
    const auto type = static_cast<DType>(t.type);
    std::vector<float> down(static_cast<size_t>(kFf * kEmbd)), col(kEmbd);
    for (int64_t r = 0; r < kEmbd; ++r) {
      dequantize_row(type, t.data + r * row_bytes(type, kFf), down.data() + r * kFf, kFf);
    }
    // Stored in the model's own type, as PowerInfer's converter and quantizer do.
    auto& blob = blobs.emplace_back(static_cast<size_t>(row_bytes(type, kEmbd) * kFf));
    for (int64_t i = 0; i < kFf; ++i) {
      for (int64_t r = 0; r < kEmbd; ++r) col[r] = down[r * kFf + i];
      quantize_row(type, col.data(), blob.data() + i * row_bytes(type, kEmbd), kEmbd);
    }
    std::string name = t.name;
    name.replace(name.find("ffn_down"), 8, "ffn_down_t");
    const int64_t ne[2] = {kEmbd, kFf};
    w.add_tensor(name, t.type, ne, blob.data(), blob.size());
  }
  if (po.predictors) {
    uint32_t seed = 7;
    auto next = [&seed] {
      seed = seed * 1664525u + 1013904223u;
      return static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
    };
    for (int64_t l = 0; l < kLayers; ++l) {
      const int64_t h = 16 + 8 * l;  // adaptive predictors: a different width per layer
      const std::string p = "blk." + std::to_string(l) + ".";
      auto& fc1 = blobs.emplace_back(static_cast<size_t>(h * kEmbd * 4));
      auto& fc2 = blobs.emplace_back(static_cast<size_t>(kFf * h * 4));
      for (size_t i = 0; i < fc1.size(); i += 4) {
        const float v = next();
        std::memcpy(fc1.data() + i, &v, 4);
      }
      for (size_t i = 0; i < fc2.size(); i += 4) {
        const float v = next();
        std::memcpy(fc2.data() + i, &v, 4);
      }
      const int64_t ne1[2] = {kEmbd, h};
      const int64_t ne2[2] = {h, kFf};
      const int64_t bad[2] = {h + 1, kFf};
      w.add_tensor(p + "fc1.weight", 0, ne1, fc1.data(), fc1.size());
      if (po.drop_fc2_in_layer1 && l == 1) continue;
      if (po.wrong_fc2_width && l == 2) {
        auto& b = blobs.emplace_back(static_cast<size_t>(kFf * (h + 1) * 4));
        w.add_tensor(p + "fc2.weight", 0, bad, b.data(), b.size());
      } else {
        w.add_tensor(p + "fc2.weight", 0, ne2, fc2.data(), fc2.size());
      }
    }
  }
  w.write(dst);
  return dst;
}

std::vector<float> logits_after(const std::shared_ptr<const Model>& m, SessionOptions o,
                                const std::vector<int32_t>& prompt, bool one_by_one) {
  Session s(m, o);
  std::span<const float> out;
  if (one_by_one) {
    for (const int32_t t : prompt) out = s.eval({&t, 1});
  } else {
    out = s.eval(prompt);
  }
  return {out.begin(), out.end()};
}

std::vector<int32_t> greedy(const std::shared_ptr<const Model>& m, SessionOptions o, int n) {
  Session s(m, o);
  std::vector<int32_t> ids;
  int32_t t = m->bos();
  for (int i = 0; i < n; ++i) {
    const auto l = s.eval({&t, 1});
    t = static_cast<int32_t>(argmax(l.data(), static_cast<int64_t>(l.size())));
    ids.push_back(t);
  }
  return ids;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

const std::vector<int32_t> kPrompt = {1, 40, 71, 99, 120, 33, 250, 7, 64, 180, 12, 5};

TEST(SparseModel, OracleEqualsDenseForEveryTypeAndThreadCount) {
  const std::string dir = test::temp_dir();
  for (const DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    const auto m = Model::load(make_relu_model(dir, type));
    EXPECT_FALSE(m->has_predictors());
    SessionOptions dense;
    dense.sparse = SparseMode::Dense;
    const auto ref = logits_after(m, dense, kPrompt, true);
    // Dense down projections of quantized weights multiply Q8-quantized activations; the sparse
    // axpy scales weight rows by the exact float activations (Q8_0) or by int8-rounded
    // coefficients with their own per-32 scales (one-token Q4_0), so for those types the two
    // differ by quantization errors of the same size (logits here are of order 1).
    const bool quantized = type == DType::Q8_0 || type == DType::Q4_0;
    const float tol = quantized ? 0.1f : 2e-3f;
    for (const int threads : {1, 2, 3}) {
      SessionOptions o;
      o.sparse = SparseMode::Oracle;
      o.n_threads = threads;
      const auto got = logits_after(m, o, kPrompt, true);
      EXPECT_LT(max_abs_diff(ref, got), tol) << dtype_name(type) << ", " << threads << " threads";
      // The prompt in one batch goes through the dense kernels with the same masks.
      EXPECT_LT(max_abs_diff(ref, logits_after(m, o, kPrompt, false)), 2e-3f) << dtype_name(type);
    }
    // Results do not depend on the thread count.
    SessionOptions o1, o3;
    o1.sparse = o3.sparse = SparseMode::Oracle;
    o1.n_threads = 1;
    o3.n_threads = 3;
    EXPECT_EQ(logits_after(m, o1, kPrompt, true), logits_after(m, o3, kPrompt, true))
        << dtype_name(type);
  }
}

TEST(SparseModel, PowerInferFileLoadsAndRunsInEveryMode) {
  const std::string dir = test::temp_dir();
  const std::string plain = make_relu_model(dir, DType::F32);
  const auto pwri = Model::load(to_powerinfer(plain, dir + "/pwri.gguf", {}));
  EXPECT_TRUE(pwri->is_powerinfer());
  EXPECT_TRUE(pwri->has_predictors());
  EXPECT_EQ(pwri->config().ffn_act, FfnActivation::Relu);
  EXPECT_EQ(pwri->sparse_threshold(), 0.0f);

  // Same weights, so dense and oracle on the PWRI file match dense on the plain file.
  SessionOptions dense;
  dense.sparse = SparseMode::Dense;
  const auto ref = logits_after(Model::load(plain), dense, kPrompt, true);
  EXPECT_LT(max_abs_diff(ref, logits_after(pwri, dense, kPrompt, true)), 2e-3f);
  EXPECT_LT(max_abs_diff(ref, logits_after(pwri, dense, kPrompt, false)), 2e-3f);
  SessionOptions oracle;
  oracle.sparse = SparseMode::Oracle;
  EXPECT_LT(max_abs_diff(ref, logits_after(pwri, oracle, kPrompt, true)), 2e-3f);

  // Auto picks the predictors; they are random here, so they skip some neurons.
  Session s(pwri, SessionOptions{});
  EXPECT_EQ(s.sparse_mode(), SparseMode::Predictor);
  for (const int32_t t : kPrompt) s.eval({&t, 1});
  EXPECT_GT(s.sparse_stats().sparsity(), 0.05);
  EXPECT_LT(s.sparse_stats().sparsity(), 0.95);
  EXPECT_GT(s.sparse_stats().bytes_per_token(), 0.0);

  // With every neuron predicted active, predictor mode is the dense model.
  SessionOptions all;
  all.sparse = SparseMode::Predictor;
  all.sparse_threshold = -std::numeric_limits<float>::infinity();
  EXPECT_LT(max_abs_diff(ref, logits_after(pwri, all, kPrompt, true)), 2e-3f);
  EXPECT_LT(max_abs_diff(ref, logits_after(pwri, all, kPrompt, false)), 2e-3f);
}

// PowerInfer ships F16 and Q4_0 files; their ffn_down_t is quantized along n_embd, so the oracle
// output equals dense on the same file up to the dense path's activation quantization.
TEST(SparseModel, PowerInferF16AndQ4_0FilesRun) {
  const std::string dir = test::temp_dir();
  for (const DType type : {DType::F16, DType::Q4_0}) {
    const std::string name = dir + "/pwri-" + std::string(dtype_name(type)) + ".gguf";
    const auto m = Model::load(to_powerinfer(make_relu_model(dir, type), name, {}));
    ASSERT_TRUE(m->is_powerinfer());
    SessionOptions dense, oracle, pred;
    dense.sparse = SparseMode::Dense;
    oracle.sparse = SparseMode::Oracle;
    pred.sparse = SparseMode::Predictor;
    const auto ref = logits_after(m, dense, kPrompt, true);
    EXPECT_LT(max_abs_diff(ref, logits_after(m, oracle, kPrompt, true)), 2e-3f) << dtype_name(type);
    const auto p = logits_after(m, pred, kPrompt, true);
    for (const float v : p) ASSERT_TRUE(std::isfinite(v)) << dtype_name(type);
    pred.sparse_threshold = -std::numeric_limits<float>::infinity();
    EXPECT_LT(max_abs_diff(ref, logits_after(m, pred, kPrompt, true)), 2e-3f) << dtype_name(type);
  }
}

TEST(SparseModel, PredictorDecodeMatchesPredictorPrompt) {
  // Single-token steps (gather/axpy) and a masked prompt batch (dense kernels + masks) compute
  // the same function; batches of a few tokens take the union of their active sets.
  const std::string dir = test::temp_dir();
  const auto m = Model::load(to_powerinfer(make_relu_model(dir, DType::F32), dir + "/p.gguf", {}));
  SessionOptions o;
  o.sparse = SparseMode::Predictor;
  o.sparse_prompt = true;
  const auto steps = logits_after(m, o, kPrompt, true);
  EXPECT_LT(max_abs_diff(steps, logits_after(m, o, kPrompt, false)), 2e-3f);
  // By default a prompt batch runs the dense FFN (exact KV cache, dense prompt speed).
  SessionOptions dense = o;
  dense.sparse = SparseMode::Dense;
  o.sparse_prompt = false;
  EXPECT_LT(max_abs_diff(logits_after(m, dense, kPrompt, false),
                         logits_after(m, o, kPrompt, false)), 2e-3f);
  EXPECT_GT(max_abs_diff(steps, logits_after(m, o, kPrompt, false)), 1e-3f)
      << "random predictors should change the output";
  Session few(m, o);
  few.eval({kPrompt.data(), 5});
  const auto tail = few.eval({kPrompt.data() + 5, kPrompt.size() - 5});
  EXPECT_LT(max_abs_diff(steps, {tail.begin(), tail.end()}), 2e-3f);
}

TEST(SparseModel, AuditCountsRecall) {
  const std::string dir = test::temp_dir();
  const auto m = Model::load(to_powerinfer(make_relu_model(dir, DType::F32), dir + "/p.gguf", {}));
  SessionOptions o;
  o.sparse = SparseMode::Predictor;
  o.sparse_audit = true;
  Session s(m, o);
  for (const int32_t t : kPrompt) s.eval({&t, 1});
  const SparseStats& st = s.sparse_stats();
  EXPECT_GT(st.audit_true, 0u);
  EXPECT_LE(st.audit_hit, st.audit_true);
  EXPECT_LE(st.audit_hit, st.neurons_active);
  EXPECT_GE(st.recall(), 0.0);
  EXPECT_LE(st.recall(), 1.0);
  // Oracle-level predictor: every neuron predicted gives recall 1.
  o.sparse_threshold = -std::numeric_limits<float>::infinity();
  Session all(m, o);
  for (const int32_t t : kPrompt) all.eval({&t, 1});
  EXPECT_EQ(all.sparse_stats().recall(), 1.0);
}

TEST(SparseModel, MalformedPowerInferFilesFailClearly) {
  const std::string dir = test::temp_dir();
  const std::string plain = make_relu_model(dir, DType::F32);
  auto error_of = [&](const PwriOptions& po, const std::string& name) {
    try {
      Model::load(to_powerinfer(plain, dir + "/" + name, po));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  PwriOptions missing_fc2;
  missing_fc2.drop_fc2_in_layer1 = true;
  EXPECT_NE(error_of(missing_fc2, "a.gguf").find("fc2"), std::string::npos)
      << error_of(missing_fc2, "a.gguf");
  PwriOptions wrong_width;
  wrong_width.wrong_fc2_width = true;
  EXPECT_NE(error_of(wrong_width, "b.gguf").find("blk.2.fc2.weight"), std::string::npos)
      << error_of(wrong_width, "b.gguf");

  // No predictors: predictor mode is refused with a hint, auto falls back to dense.
  PwriOptions none;
  none.predictors = false;
  const auto m = Model::load(to_powerinfer(plain, dir + "/c.gguf", none));
  SessionOptions o;
  o.sparse = SparseMode::Predictor;
  EXPECT_THROW(Session(m, o), Error);
  EXPECT_EQ(Session(m, SessionOptions{}).sparse_mode(), SparseMode::Dense);
}

TEST(SparseModel, ParseSparseMode) {
  EXPECT_EQ(parse_sparse_mode("dense"), SparseMode::Dense);
  EXPECT_EQ(parse_sparse_mode("oracle"), SparseMode::Oracle);
  EXPECT_EQ(parse_sparse_mode("predictor"), SparseMode::Predictor);
  EXPECT_EQ(parse_sparse_mode("threshold"), SparseMode::Threshold);
  EXPECT_EQ(parse_sparse_mode("auto"), SparseMode::Auto);
  EXPECT_EQ(to_string(SparseMode::Threshold), "threshold");
  EXPECT_THROW(parse_sparse_mode("sparse"), Error);
  EXPECT_EQ(to_string(SparseMode::Oracle), "oracle");
}

TEST(SparseModel, OracleGreedyEqualsDense) {
  const std::string dir = test::temp_dir();
  const auto m = Model::load(make_relu_model(dir, DType::F16));
  SessionOptions dense, oracle;
  dense.sparse = SparseMode::Dense;
  oracle.sparse = SparseMode::Oracle;
  EXPECT_EQ(greedy(m, dense, 24), greedy(m, oracle, 24));
}

}  // namespace
}  // namespace hearth
