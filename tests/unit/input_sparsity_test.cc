// Model-wide input sparsity (SparseMode::Threshold with thresholds on every projection's input):
// the masks act where they should, decode steps and masked prompts compute the same function,
// thread counts give the same bits, and `calibrate --sparsity` reaches its target per layer, writes
// keys that --sparse auto picks up, and refuses what it cannot do. On a small synthetic SwiGLU
// model made here, so no ../shared is needed.
#include "calib/input_sparsity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "calib/calibrate.h"
#include "calib/heldout_divergence.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/quantize.h"
#include "eval/perplexity.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_internals.h"
#include "model/synth.h"
#include "ops/sparse_matmul.h"
#include "sparse/neuron_major.h"

namespace hearth {
namespace {

std::string swiglu_model() {
  SynthOptions o = test::tiny_synth_options(DType::F32);
  o.n_layer = 3;
  o.n_ff = 160;
  o.n_ctx = 256;
  const std::string path = test::temp_dir() + "/swiglu.gguf";
  write_synthetic_model(o, path);
  return path;
}

std::string text(size_t chars, uint32_t seed) { return test::random_words(chars, seed); }

using test::logits_in_steps;

SessionOptions with_thresholds(int64_t n_layer, const LayerThresholds& t) {
  SessionOptions o;
  o.n_threads = 2;
  o.sparse = SparseMode::Threshold;
  o.sparse_prompt = true;
  o.thresholds.assign(static_cast<size_t>(n_layer), t);
  o.input_major_min_width = 0;  // these models are narrow: read the copies all the same
  return o;
}

TEST(InputSparsity, EachInputsMaskReachesItsProduct) {
  // Zeroing q/k/v's whole input leaves V zero, so attention adds nothing: the same as zeroing wo's
  // input. Zeroing gate/up's input leaves every activation zero: the same as zeroing down's. Each
  // pair gives the same bits, and differs from the model without masks.
  const auto m = Model::load(swiglu_model());
  const std::vector<int32_t> tokens = m->tokenize(text(120, 3), false);
  const float all = std::numeric_limits<float>::max();
  const auto run = [&](LayerThresholds t, size_t step) {
    // A threshold that zeroes nothing (no activation is that small) on each other input, so
    // every run takes the same product paths (decode steps read the input-major copies).
    const float none = std::numeric_limits<float>::denorm_min();
    for (float* f : {&t.attn_in, &t.attn_out, &t.ffn_in, &t.down}) *f = *f > 0 ? *f : none;
    return logits_in_steps(m, with_thresholds(m->config().n_layer, t), tokens, step);
  };
  for (const size_t step : {size_t{1}, tokens.size()}) {
    const auto attn_in = run({.attn_in = all}, step);
    const auto attn_out = run({.attn_out = all}, step);
    const auto ffn_in = run({.ffn_in = all}, step);
    const auto down = run({.down = all}, step);
    EXPECT_EQ(attn_in, attn_out) << "step " << step;
    EXPECT_EQ(ffn_in, down) << "step " << step;
    EXPECT_NE(attn_in, ffn_in);
    SessionOptions dense;
    dense.n_threads = 2;
    dense.sparse = SparseMode::Dense;
    EXPECT_NE(attn_in, logits_in_steps(m, dense, tokens, step));
  }
}

TEST(InputSparsity, CountsTheWeightsSkipped) {
  const auto m = Model::load(swiglu_model());
  const ModelConfig& c = m->config();
  const std::vector<int32_t> tokens = m->tokenize(text(200, 4), false);
  const float all = std::numeric_limits<float>::max();
  // Everything skipped, then one input only: its share of the layer's thresholded weights.
  Session every(
      m, with_thresholds(c.n_layer, {.attn_in = all, .attn_out = all, .ffn_in = all, .down = all}));
  every.eval(tokens);
  EXPECT_DOUBLE_EQ(every.sparse_stats().input_sparsity(), 1.0);
  const calib::InputShape shape = calib::input_shape(c);
  Session one(m, with_thresholds(c.n_layer, {.attn_out = all}));
  one.eval(tokens);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    EXPECT_NEAR(one.sparse_stats().input_sparsity(l),
                static_cast<double>(shape.weights(kAttnOut)) /
                    static_cast<double>(shape.total_weights()),
                1e-12);
  }
  // A decode step reads wo's input-major copy only for inputs left: none here.
  SessionOptions dense_options;
  dense_options.n_threads = 2;
  dense_options.sparse = SparseMode::Dense;
  Session dense(m, dense_options);
  Session skip_wo(m, with_thresholds(c.n_layer, {.attn_out = all}));
  for (Session* s : {&dense, &skip_wo}) {
    s->eval(std::span(tokens).first(4));
    s->reset_stats();
    s->eval(std::span(tokens).subspan(4, 1));
  }
  const uint64_t wo_bytes = static_cast<uint64_t>(c.n_embd * c.n_head * c.head_dim) * sizeof(float);
  EXPECT_EQ(dense.sparse_stats().weight_bytes - skip_wo.sparse_stats().weight_bytes,
            static_cast<uint64_t>(c.n_layer) * wo_bytes);
  // By default a model this narrow keeps the dense products (zeroed inputs, every weight read).
  SessionOptions narrow = with_thresholds(c.n_layer, {.attn_out = all});
  narrow.input_major_min_width = SessionOptions{}.input_major_min_width;
  ASSERT_LT(c.n_embd, narrow.input_major_min_width);
  Session kept_dense(m, narrow);
  kept_dense.eval(std::span(tokens).first(4));
  kept_dense.reset_stats();
  kept_dense.eval(std::span(tokens).subspan(4, 1));
  EXPECT_EQ(kept_dense.sparse_stats().weight_bytes, dense.sparse_stats().weight_bytes);
  // Prompts run dense unless asked: then only the decode steps count.
  SessionOptions decode_only = with_thresholds(c.n_layer, {.attn_out = all});
  decode_only.sparse_prompt = false;
  Session d(m, decode_only);
  d.eval(tokens);
  EXPECT_EQ(d.sparse_stats().input_sparsity(), 0.0);
  d.eval(std::span(tokens).first(1));
  EXPECT_GT(d.sparse_stats().input_sparsity(), 0.0);
}

// The down projection's crossover from its copy's axpy to the file's matrix: the copy type's
// where the copy takes a weight in as many bytes as the file (F16, Q8_0), lower where it takes
// more (a Q4_0 or Q4_K file's Q8_0 copy), never higher where it takes fewer.
TEST(NeuronMajorDown, CrossoverWeighsTheCopysBytesAgainstTheFiles) {
  const auto crossover = [](DType file, DType copy) {
    return sparse::down_crossover(Matrix{file, nullptr, 2048, 5632},
                                  Matrix{copy, nullptr, 5632, 2048});
  };
  EXPECT_DOUBLE_EQ(crossover(DType::F16, DType::F16), sparse::axpy_crossover(DType::F16));
  EXPECT_DOUBLE_EQ(crossover(DType::Q8_0, DType::Q8_0), sparse::axpy_crossover(DType::Q8_0));
  EXPECT_DOUBLE_EQ(crossover(DType::Q4_0, DType::Q8_0),
                   sparse::axpy_crossover(DType::Q8_0) * 18.0 / 34.0);
  EXPECT_DOUBLE_EQ(crossover(DType::Q4_K, DType::Q8_0),
                   sparse::axpy_crossover(DType::Q8_0) * 144.0 / 272.0);
  EXPECT_DOUBLE_EQ(crossover(DType::F32, DType::F16), sparse::axpy_crossover(DType::F16));
}

TEST(InputSparsity, QuantizedModelsReadRequantizedInputMajorCopies) {
  // The copies' types: about the file's size, with axpy kernels, where the blocks fit.
  EXPECT_EQ(sparse::input_major_type(DType::F16, 64), DType::F16);
  EXPECT_EQ(sparse::input_major_type(DType::BF16, 64), DType::F32);
  EXPECT_EQ(sparse::input_major_type(DType::Q8_0, 64), DType::Q8_0);
  EXPECT_EQ(sparse::input_major_type(DType::Q4_0, 64), DType::Q4_0);
  EXPECT_EQ(sparse::input_major_type(DType::Q4_K, 512), DType::Q4_K);
  EXPECT_EQ(sparse::input_major_type(DType::Q4_K, 64), DType::Q4_0);
  EXPECT_EQ(sparse::input_major_type(DType::IQ4_XS, 256), DType::Q4_K);
  EXPECT_EQ(sparse::input_major_type(DType::Q5_0, 256), DType::Q5_K);
  EXPECT_EQ(sparse::input_major_type(DType::Q6_K, 256), DType::Q6_K);
  EXPECT_EQ(sparse::input_major_type(DType::Q6_K, 96), DType::Q8_0);

  // A Q8_0 model: decode steps through the requantized copies stay close to the masked prompt
  // (which reads the file's matrices), and read fewer bytes than dense steps.
  SynthOptions so = test::tiny_synth_options(DType::Q8_0);
  so.n_ctx = 256;
  const std::string path = test::temp_dir() + "/q8.gguf";
  write_synthetic_model(so, path);
  const auto m = Model::load(path);
  const std::vector<int32_t> tokens = m->tokenize(text(100, 5), false);
  LayerThresholds t{.attn_in = 0.3f, .attn_out = 0.05f, .ffn_in = 0.3f, .down = 0.02f};
  const SessionOptions o = with_thresholds(m->config().n_layer, t);
  const auto steps = logits_in_steps(m, o, tokens, 1);
  const auto batch = logits_in_steps(m, o, tokens, tokens.size());
  float diff = 0, scale = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    diff = std::max(diff, std::fabs(steps[i] - batch[i]));
    scale = std::max(scale, std::fabs(batch[i]));
  }
  EXPECT_LT(diff, 0.05f * scale);
  SessionOptions dense_options;
  dense_options.sparse = SparseMode::Dense;
  Session dense(m, dense_options), sparse(m, o);
  for (Session* s : {&dense, &sparse}) {
    s->eval(std::span(tokens).first(4));
    s->reset_stats();
    s->eval(std::span(tokens).subspan(4, 1));
  }
  EXPECT_LT(sparse.sparse_stats().weight_bytes, dense.sparse_stats().weight_bytes);
  EXPECT_GT(sparse.sparse_stats().input_sparsity(), 0.1);
}

// A matrix [rows, cols] of random values in type t, its bytes in `storage`.
Matrix random_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed,
                     std::vector<std::vector<uint8_t>>& storage) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = normal(rng);
  auto& bytes = storage.emplace_back(static_cast<size_t>(rows * row_bytes(t, cols)));
  quantize_rows(t, values.data(), bytes.data(), rows, cols);
  return Matrix{t, bytes.data(), rows, cols};
}

// Each input's weights lie in the copy's row its reader expects: lane-grouped in float copies of
// float matrices (lane_matvec), in input order in every other copy (sparse_axpy_each), the F16
// copy of a quantized matrix whose outputs fit no block among them.
TEST(InputSparsity, CopiesHoldEachInputsWeightsWhereTheirReaderLooks) {
  struct Case {
    DType type;
    int64_t rows;  // outputs
    DType copy;
    bool grouped;
  };
  const Case cases[] = {{DType::F16, 48, DType::F16, true},
                        {DType::BF16, 40, DType::F32, true},
                        {DType::Q4_0, 40, DType::F16, false},
                        {DType::Q8_0, 64, DType::Q8_0, false}};
  constexpr int64_t kInputs = 96;
  for (const Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.type));
    std::vector<std::vector<uint8_t>> storage;
    LayerWeights l;
    l.wo = random_matrix(c.type, c.rows, kInputs, 5, storage);
    const sparse::InputMajor im = sparse::make_input_major({l}, {});
    const Matrix& t = im.layers[0].wo_t;
    ASSERT_EQ(t.type, c.copy);
    ASSERT_EQ(t.rows, kInputs);
    std::vector<float> w(static_cast<size_t>(c.rows * kInputs)), row(static_cast<size_t>(c.rows));
    dequantize_row(c.type, l.wo.data, w.data(), c.rows * kInputs);
    for (int64_t i = 0; i < kInputs; ++i) {
      dequantize_row(t.type, t.row(c.grouped ? lane_grouped_row(i, kInputs) : i), row.data(),
                     c.rows);
      for (int64_t o = 0; o < c.rows; ++o) {
        const float want = w[static_cast<size_t>(o * kInputs + i)];
        // F16 rounds each value; Q8_0 by a step of its block's largest magnitude / 127.
        const float tolerance = c.copy == DType::Q8_0 ? 0.05f : 1e-3f * std::fabs(want) + 1e-6f;
        ASSERT_NEAR(row[static_cast<size_t>(o)], want, tolerance)
            << "input " << i << " output " << o;
      }
    }
  }
}

TEST(InputSparsity, JointQkvCopyHoldsTheBytesOfThreeCopies) {
  struct Case {
    DType q, kv;  // the file's types of wq and of wk, wv
    int64_t q_rows, kv_rows;
    bool joint;  // whether the three share one copy
  };
  const Case cases[] = {
      {DType::F16, DType::F16, 96, 40, true},      {DType::BF16, DType::BF16, 64, 24, true},
      {DType::Q8_0, DType::Q8_0, 128, 64, true},   {DType::Q4_0, DType::Q4_0, 128, 96, true},
      {DType::Q4_K, DType::Q4_K, 512, 256, true},  {DType::Q6_K, DType::Q6_K, 512, 256, true},
      {DType::Q4_K, DType::Q6_K, 512, 256, false},  // Q4_K_M's attn_v: copies of two types
      {DType::Q4_K, DType::Q4_K, 512, 96, false},   // k's copy would be Q4_0, q's Q4_K
      {DType::F16, DType::F32, 64, 32, false},
  };
  constexpr int64_t kInputs = 256;  // a K-quant row
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.q)) + "/" + std::string(dtype_name(c.kv)));
    std::vector<std::vector<uint8_t>> storage;
    LayerWeights joint, only_q, only_k, only_v;
    joint.wq = only_q.wq = random_matrix(c.q, c.q_rows, kInputs, 1, storage);
    joint.wk = only_k.wk = random_matrix(c.kv, c.kv_rows, kInputs, 2, storage);
    joint.wv = only_v.wv = random_matrix(c.kv, c.kv_rows, kInputs, 3, storage);
    const sparse::InputMajor im = sparse::make_input_major({joint, only_q, only_k, only_v}, {});
    const InputMajorLayer& l = im.layers[0];
    ASSERT_EQ(l.wqkv_t.present(), c.joint);
    if (!c.joint) {
      EXPECT_TRUE(l.wq_t.present() && l.wk_t.present() && l.wv_t.present());
      continue;
    }
    EXPECT_FALSE(l.wq_t.present() || l.wk_t.present() || l.wv_t.present());
    const Matrix& q_t = im.layers[1].wq_t;
    const Matrix& k_t = im.layers[2].wk_t;
    const Matrix& v_t = im.layers[3].wv_t;
    ASSERT_EQ(l.wqkv_t.type, q_t.type);
    ASSERT_EQ(l.wqkv_t.rows, kInputs);
    ASSERT_EQ(l.wqkv_t.cols, c.q_rows + 2 * c.kv_rows);
    const auto q_bytes = static_cast<size_t>(row_bytes(q_t.type, q_t.cols));
    const auto kv_bytes = static_cast<size_t>(row_bytes(k_t.type, k_t.cols));
    for (int64_t j = 0; j < kInputs; ++j) {
      const uint8_t* row = l.wqkv_t.row(j);
      EXPECT_TRUE(std::equal(row, row + q_bytes, q_t.row(j)));
      EXPECT_TRUE(std::equal(row + q_bytes, row + q_bytes + kv_bytes, k_t.row(j)));
      EXPECT_TRUE(std::equal(row + q_bytes + kv_bytes, row + q_bytes + 2 * kv_bytes, v_t.row(j)));
    }
  }
}

// A quantized copy is made only where the input's calibrated share leaves fewer rows to read than
// its type's axpy crossover; float copies wherever the input skips anything (one that skips
// nothing reads every row, slower than the file's matrix); every copy where the file has no
// shares.
TEST(InputSparsity, QuantizedCopiesOnlyWhereTheyPay) {
  constexpr int64_t kInputs = 256;
  for (const DType t : {DType::Q4_0, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<std::vector<uint8_t>> storage;
    LayerWeights l;
    l.wq = random_matrix(t, 128, kInputs, 1, storage);
    l.wk = random_matrix(t, 64, kInputs, 2, storage);
    l.wv = random_matrix(t, 64, kInputs, 3, storage);
    l.wo = random_matrix(t, kInputs, 128, 4, storage);
    l.ffn_gate = random_matrix(t, 96, kInputs, 5, storage);
    l.ffn_up = random_matrix(t, 96, kInputs, 6, storage);
    const DType copy = sparse::input_major_type(t, 128);
    const double crossover = sparse::axpy_crossover(copy);
    const bool quantized = dtype_block_size(copy) > 1;
    // attn_in just short of paying, attn_out just past it, ffn_in far past it.
    const float below = static_cast<float>(1.0 - crossover) - 0.01f;
    const float above = static_cast<float>(1.0 - crossover) + 0.01f;
    const sparse::InputMajor im =
        sparse::make_input_major({l, l}, {below, above, 0.9f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f});
    const InputMajorLayer& first = im.layers[0];
    EXPECT_EQ(first.wqkv_t.present(), !quantized);
    EXPECT_TRUE(first.wo_t.present());
    EXPECT_TRUE(first.gate_t.present() && first.up_t.present());
    const InputMajorLayer& second = im.layers[1];  // no input skips anything
    EXPECT_FALSE(second.wqkv_t.present() || second.wo_t.present() || second.gate_t.present() ||
                 second.up_t.present());
    const sparse::InputMajor all = sparse::make_input_major({l}, {});
    EXPECT_TRUE(all.layers[0].wqkv_t.present() && all.layers[0].wo_t.present() &&
                all.layers[0].gate_t.present() && all.layers[0].up_t.present());
  }
}

// What the search weighs a decode step by: the bytes the runtime's paths read (copies only where
// they pay, down's axpy below its crossover) and their time in dense bytes.
TEST(InputSparsity, ReadCostsFollowTheRuntimesPaths) {
  constexpr int64_t kInputs = 512, kFf = 1024;
  static const uint8_t kSome = 0;  // input_read reads shapes and types only
  const auto layer = [](DType t) {
    LayerWeights l;
    l.wq = Matrix{t, &kSome, 512, kInputs};
    l.wk = Matrix{t, &kSome, 128, kInputs};
    l.wv = Matrix{t, &kSome, 128, kInputs};
    l.wo = Matrix{t, &kSome, kInputs, 512};
    l.ffn_gate = Matrix{t, &kSome, kFf, kInputs};
    l.ffn_up = Matrix{t, &kSome, kFf, kInputs};
    l.ffn_down = Matrix{t, &kSome, kInputs, kFf};
    return l;
  };
  const auto bytes = [](DType t, int64_t rows, int64_t cols) {
    return static_cast<double>(rows * row_bytes(t, cols));
  };
  const LayerWeights f16 = layer(DType::F16);
  // Reading every element takes the file's matrices.
  for (int k = 0; k < kInputKinds; ++k) {
    const sparse::InputRead all = sparse::input_read(f16, static_cast<InputKind>(k), 1.0);
    EXPECT_EQ(all.bytes, all.dense);
    EXPECT_EQ(all.time, all.dense);
  }
  // q, k and v: exact copies of the same bytes, one walk over the input's rows.
  sparse::InputRead r = sparse::input_read(f16, kAttnIn, 0.5);
  EXPECT_EQ(r.dense, bytes(DType::F16, 768, kInputs));
  EXPECT_EQ(r.bytes, 0.5 * r.dense);
  EXPECT_EQ(r.time, r.bytes + 0.5 * kInputs * sparse::kFloatCopyRowCost);
  // gate and up: a walk each.
  r = sparse::input_read(f16, kFfnIn, 0.5);
  EXPECT_EQ(r.time, r.bytes + 2 * 0.5 * kInputs * sparse::kFloatCopyRowCost);
  // Down: the axpy over its neuron-major copy below the crossover, the file's matrix above.
  const double crossover = sparse::axpy_crossover(DType::F16);
  r = sparse::input_read(f16, kDownIn, 0.5);
  EXPECT_EQ(r.dense, bytes(DType::F16, kInputs, kFf));
  EXPECT_EQ(r.bytes, 0.5 * r.dense);
  EXPECT_EQ(r.time, r.bytes + 0.5 * kFf * sparse::kFloatCopyRowCost);
  r = sparse::input_read(f16, kDownIn, crossover + 0.01);
  EXPECT_EQ(r.time, r.dense);
  r = sparse::input_read(layer(DType::Q8_0), kDownIn, 0.1);
  EXPECT_DOUBLE_EQ(r.time, r.dense * 0.1 / sparse::axpy_crossover(DType::Q8_0));
  // A quantized input's copies only below their crossover, where they save time in proportion.
  const LayerWeights q4 = layer(DType::Q4_0);
  const double q4_crossover = sparse::axpy_crossover(DType::Q4_0);
  r = sparse::input_read(q4, kFfnIn, q4_crossover + 0.01);
  EXPECT_EQ(r.bytes, r.dense);
  EXPECT_EQ(r.time, r.dense);
  r = sparse::input_read(q4, kFfnIn, q4_crossover / 2);
  EXPECT_EQ(r.dense, 2 * bytes(DType::Q4_0, kFf, kInputs));
  EXPECT_DOUBLE_EQ(r.bytes, q4_crossover / 2 * 2 * bytes(DType::Q4_0, kInputs, kFf));
  EXPECT_DOUBLE_EQ(r.time, r.dense / 2);
}

// A model-wide file's layers get a neuron-major down only where their calibrated down share leaves
// fewer rows to read than the crossover (elsewhere every decode step streams ffn_down), or where a
// predictor, not the thresholds, decides what down reads.
TEST(NeuronMajorDown, CopiesOnlyWhereTheSharesMakeThemPay) {
  std::vector<std::vector<uint8_t>> storage;
  LayerWeights l;
  l.ffn_down = random_matrix(DType::Q4_0, 64, 96, 1, storage);
  LayerWeights with_predictor = l;
  with_predictor.fc1 = random_matrix(DType::F16, 16, 64, 2, storage);
  with_predictor.fc2 = random_matrix(DType::F16, 96, 16, 3, storage);
  const double crossover = sparse::down_crossover(
      l.ffn_down, Matrix{sparse::neuron_major_type(DType::Q4_0, 64), nullptr, 96, 64});
  const auto above = static_cast<float>(1.0 - crossover) + 0.01f;  // a share that pays
  const auto below = static_cast<float>(1.0 - crossover) - 0.01f;
  const std::vector<float> shares = {0, 0, 0, above, 0, 0, 0, below, 0, 0, 0, below};
  const sparse::NeuronMajorDown made =
      sparse::make_neuron_major_down({l, l, with_predictor}, {}, shares);
  EXPECT_TRUE(made.layers[0].present());
  EXPECT_FALSE(made.layers[1].present());
  EXPECT_TRUE(made.layers[2].present());
  const sparse::NeuronMajorDown all = sparse::make_neuron_major_down({l, l, with_predictor}, {});
  for (const Matrix& m : all.layers) EXPECT_TRUE(m.present());
}

// A file whose input shares are out of range or of the wrong count is refused by name.
TEST(InputSparsity, MalformedSharesAreRefused) {
  const auto m = Model::load(swiglu_model());
  const ModelConfig& c = m->config();
  for (const auto& [shares, message] :
       {std::pair{std::vector<float>{0.2f, 1.5f, 0.4f, 0.8f}, "outside [0, 1]"},
        std::pair{std::vector<float>{0.2f, 0.3f}, "4 per layer"}}) {
    calib::CalibrationResult r;
    r.report.kind = "input thresholds";
    r.thresholds.assign(static_cast<size_t>(c.n_layer), LayerThresholds{.attn_in = 0.1f});
    r.report.layers.resize(static_cast<size_t>(c.n_layer));
    for (auto& l : r.report.layers) {
      l.freq.assign(static_cast<size_t>(c.n_ff), 0.5);
      l.input_share.assign(shares.begin(), shares.end());
    }
    const std::string path = test::temp_dir() + "/bad_shares.gguf";
    calib::write_calibrated_model(*m, r, path);
    try {
      Model::load(path);
      ADD_FAILURE() << "loaded a file with shares " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("input_shares"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// The search's measure is the mean KL divergence of every held-out position's next-token
// distribution from the dense model's (its reference in F16), and the text's own loss besides.
TEST(InputSparsity, HeldoutDivergenceIsTheMeanKlFromTheDenseModel) {
  const auto model = Model::load(swiglu_model());
  const int64_t window = 40;
  const std::vector<int32_t> tokens = model->tokenize(text(400, 5), false);
  ASSERT_GT(tokens.size(), 2 * static_cast<size_t>(window));  // several windows
  calib::HeldoutDivergence d(model, tokens, window, 2);
  EXPECT_EQ(d.dense().kl, 0.0);
  LayerThresholds t;
  t.attn_in = t.attn_out = t.ffn_in = t.down = 0.3f;
  const auto n_layer = model->config().n_layer;
  const calib::HeldoutDivergence::Result r = d.measure(std::vector(n_layer, t));
  EXPECT_EQ(d.evaluations(), 2);
  ASSERT_EQ(r.achieved.size(), static_cast<size_t>(n_layer));
  for (const double a : r.achieved) EXPECT_GT(a, 0.05);

  // The same windows by hand: BOS where the model adds one, then `window` tokens from an empty
  // context.
  SessionOptions dense_o;
  dense_o.n_threads = 2;
  dense_o.sparse = SparseMode::Dense;
  SessionOptions sparse_o = with_thresholds(n_layer, t);
  sparse_o.input_major_min_width = std::numeric_limits<int32_t>::max();
  const auto n_vocab = static_cast<size_t>(model->config().n_vocab);
  double kl = 0, dense_nll = 0, sparse_nll = 0;
  size_t positions = 0;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(window)) {
    std::vector<int32_t> input;
    if (model->add_bos_default() && model->bos() >= 0) input.push_back(model->bos());
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(window));
    input.insert(input.end(), tokens.begin() + static_cast<ptrdiff_t>(i),
                 tokens.begin() + static_cast<ptrdiff_t>(i + n));
    std::vector<float> base(input.size() * n_vocab), other(input.size() * n_vocab);
    Session(model, dense_o).eval_all(input, base);
    Session(model, sparse_o).eval_all(input, other);
    for (size_t p = 0; p + 1 < input.size(); ++p, ++positions) {
      const std::span<const float> b(base.data() + p * n_vocab, n_vocab);
      const std::span<const float> o(other.data() + p * n_vocab, n_vocab);
      kl += eval::kl_divergence(b, o);
      dense_nll -= eval::log_prob(b, input[p + 1]);
      sparse_nll -= eval::log_prob(o, input[p + 1]);
    }
  }
  const auto count = static_cast<double>(positions);
  EXPECT_NEAR(d.dense().nll, dense_nll / count, 1e-9);
  EXPECT_NEAR(r.nll, sparse_nll / count, 1e-9);
  EXPECT_GT(kl, 0.0);
  EXPECT_NEAR(r.kl, kl / count, 0.01 * kl / count) << "within the F16 reference's rounding";
}

calib::CalibrateOptions calibration(double sparsity) {
  calib::CalibrateOptions o;
  o.text = text(8000, 1);
  o.heldout_text = text(3000, 2);
  o.window = 96;
  o.n_threads = 2;
  o.sparsity = sparsity;
  o.search_tokens = 384;
  return o;
}

TEST(InputSparsitySlow, CalibrationReachesTheTargetPerLayer) {
  const auto model = Model::load(swiglu_model());
  const auto r = calib::calibrate(model, calibration(0.4));
  ASSERT_EQ(r.kind, calib::CalibKind::InputThresholds);
  ASSERT_EQ(r.thresholds.size(), 3u);
  const calib::InputShape shape = calib::input_shape(model->config());
  for (const auto& l : r.report.layers) {
    ASSERT_EQ(l.input_share.size(), 4u);
    double skipped = 0;
    for (int k = 0; k < kInputKinds; ++k) {
      EXPECT_GE(l.input_share[k], 0.0);
      EXPECT_LE(l.input_share[k], 0.95 + 1e-9);
      skipped += l.input_share[k] * static_cast<double>(shape.weights(k));
    }
    // Allocated exactly at the target, then rescaled by the correction rounds.
    EXPECT_NEAR(skipped / static_cast<double>(shape.total_weights()), 0.4, 0.1) << "allocated";
    EXPECT_NEAR(l.true_sparsity, 0.4, 0.02) << "achieved on held-out tokens";
  }

  // The file carries the thresholds; --sparse auto runs them, and decode steps compute what a
  // masked prompt does (both through the input-major copies), with the same bits at any thread
  // count.
  const std::string out = test::temp_dir() + "/model-wide.gguf";
  calib::write_calibrated_model(*model, r, out);
  const auto cal = Model::load(out);
  ASSERT_TRUE(cal->has_thresholds());
  EXPECT_EQ(cal->config().thresholds[1].attn_in, r.thresholds[1].attn_in);
  EXPECT_EQ(cal->config().thresholds[1].gate, 0.0f);
  const auto shares = calib::read_calib_report(*cal).layers[2].input_share;
  ASSERT_EQ(shares.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(shares[k], r.report.layers[2].input_share[k], 1e-6);
  SessionOptions o;
  o.n_threads = 2;
  o.sparse_prompt = true;
  o.input_major_min_width = 0;
  Session auto_mode(cal, o);
  EXPECT_EQ(auto_mode.sparse_mode(), SparseMode::Threshold);
  const std::vector<int32_t> tokens = cal->tokenize(text(150, 9), false);
  const auto steps = logits_in_steps(cal, o, tokens, 1);
  EXPECT_EQ(logits_in_steps(cal, o, tokens, tokens.size()), steps);
  o.n_threads = 1;
  EXPECT_EQ(logits_in_steps(cal, o, tokens, 1), steps);
}

// The modelled decode time of a layer's inputs at the allocation's shares, in dense bytes.
double modelled_time(const Model& model, const calib::InputAllocation& a) {
  double t = 0;
  const Weights& w = model_weights(model);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    for (int k = 0; k < kInputKinds; ++k) {
      t += sparse::input_read(w.layers[l], static_cast<InputKind>(k), 1.0 - a.shares[l][k]).time;
    }
  }
  return t;
}

// Allocated by the decode time it saves, a model wide enough for input-major copies reaches the
// same weight sparsity as by the weights skipped, in less modelled time; a narrower model, whose
// decode steps read no copies, is allocated by weights whatever was asked.
TEST(InputSparsitySlow, SpeedAllocationSavesTimeWhereCopiesAreRead) {
  SynthOptions so = test::tiny_synth_options(DType::F16);
  so.n_embd = SessionOptions{}.input_major_min_width;
  so.n_ff = 1024;
  so.n_head = 8;
  so.n_ctx = 256;
  const std::string path = test::temp_dir() + "/wide.gguf";
  write_synthetic_model(so, path);
  const auto model = Model::load(path);
  const std::vector<int32_t> train = model->tokenize(text(3000, 1), true);
  const std::vector<int32_t> heldout = model->tokenize(text(1000, 2), true);
  calib::InputSparsityOptions o;
  o.sparsity = 0.4;
  o.window = 96;
  o.step = 0.1;
  o.n_threads = 2;
  const calib::InputAllocation by_speed = calib::allocate_input_sparsity(model, train, heldout, o);
  o.allocate = calib::Allocate::Weights;
  const calib::InputAllocation by_weights =
      calib::allocate_input_sparsity(model, train, heldout, o);
  EXPECT_EQ(by_speed.allocate, calib::Allocate::Speed);
  EXPECT_EQ(by_weights.allocate, calib::Allocate::Weights);
  for (const calib::InputAllocation* a : {&by_speed, &by_weights}) {
    for (const double achieved : a->achieved) EXPECT_NEAR(achieved, 0.4, 0.02);
  }
  EXPECT_LT(modelled_time(*model, by_speed), modelled_time(*model, by_weights));

  const auto narrow = Model::load(swiglu_model());
  o.allocate = calib::Allocate::Speed;
  const calib::InputAllocation a = calib::allocate_input_sparsity(
      narrow, narrow->tokenize(text(3000, 1), true), narrow->tokenize(text(1000, 2), true), o);
  EXPECT_EQ(a.allocate, calib::Allocate::Weights);
}

TEST(InputSparsity, BadOptionsAreRefused) {
  const auto model = Model::load(swiglu_model());
  auto o = calibration(0.4);
  o.layer_groups = 4;  // more than the 3 layers
  EXPECT_THROW(calib::calibrate(model, o), Error);
  o = calibration(0.97);  // more than any input may skip
  EXPECT_THROW(calib::calibrate(model, o), Error);
  o = calibration(0.4);
  o.search_tokens = 10;
  EXPECT_THROW(calib::calibrate(model, o), Error);
  // Thresholds for another number of layers.
  SessionOptions so;
  so.sparse = SparseMode::Threshold;
  so.thresholds.resize(2);
  EXPECT_THROW(Session(model, so), Error);
}

}  // namespace
}  // namespace hearth
