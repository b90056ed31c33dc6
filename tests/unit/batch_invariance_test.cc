// Batch invariance: in every sparse mode a token's logits are the same bits whatever pass it was
// evaluated in (one token at a time, a few, a whole prompt) and whatever the thread count, so a
// prompt gives the same answer at any -b and with or without a prompt cache. Unset
// SessionOptions::sparse_prompt (PowerInfer's dense prefill) gives that up, which the tests use to
// show that they can tell the difference.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/quantize_model.h"
#include "model/synth.h"

namespace hearth {
namespace {

// A ReLU model with predictors: n_ff 1024, so that a token's active neurons fill several chunks
// of the one-token axpy, and tokens fall on both sides of the dense-down crossover at 0.6.
std::string relu_model(DType type, double sparsity) {
  SynthOptions o = test::tiny_synth_options(type, FfnActivation::Relu);
  o.n_embd = 256;
  o.n_ff = 1024;
  o.sparsity = sparsity;
  const std::string path = test::temp_dir() + "/relu-" + std::string(dtype_name(type)) + "-" +
                           std::to_string(static_cast<int>(sparsity * 100)) + ".gguf";
  write_synthetic_model(o, path);
  return path;
}

std::vector<int32_t> prompt() { return test::fixed_prompt(40); }

// Every position's logits of the prompt, evaluated in passes of n_batch tokens.
std::vector<float> all_logits(const std::shared_ptr<const Model>& m, SessionOptions o,
                              int32_t n_batch, SparseStats* stats = nullptr) {
  o.n_batch = n_batch;
  Session s(m, o);
  const auto tokens = prompt();
  std::vector<float> out(tokens.size() * static_cast<size_t>(m->config().n_vocab));
  s.eval_all(tokens, out);
  if (stats) *stats = s.sparse_stats();
  return out;
}

using test::same_bits;

// The same bits at -b 1 (every token a decode step), 8 (the largest sparse group), 9 and 512 (a
// whole prompt), and at one thread; different bits with a dense prompt.
void expect_invariant(const std::shared_ptr<const Model>& m, const SessionOptions& o,
                      const std::string& what) {
  SCOPED_TRACE(what);
  SparseStats stats;
  const auto steps = all_logits(m, o, 1);
  for (const int32_t b : {3, 8, 9, 512}) {
    EXPECT_TRUE(same_bits(steps, all_logits(m, o, b, &stats))) << "-b " << b;
  }
  EXPECT_LT(stats.neurons_active, stats.neurons_total) << "the prompt ran sparse";
  SessionOptions one = o;
  one.n_threads = 1;
  EXPECT_TRUE(same_bits(steps, all_logits(m, one, 512))) << "one thread";
  SessionOptions dense_prompt = o;
  dense_prompt.sparse_prompt = false;
  EXPECT_FALSE(same_bits(steps, all_logits(m, dense_prompt, 512))) << "a dense prompt differs";
}

SessionOptions options(SparseMode mode) {
  SessionOptions o;
  o.n_threads = 2;
  o.n_ctx = 64;
  o.sparse = mode;
  return o;
}

TEST(BatchInvariance, PredictorModeAtEveryBatchSize) {
  for (const DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    for (const double sparsity : {0.6, 0.8, 0.95}) {
      const auto m = Model::load(relu_model(type, sparsity));
      expect_invariant(m, options(SparseMode::Predictor),
                       std::string(dtype_name(type)) + " sparsity " + std::to_string(sparsity));
    }
  }
  // A K-quant mix (predictors stay f16): Q4_K rows with Q6_K ones on some layers.
  const std::string q4_k_m = test::temp_dir() + "/relu-q4_k_m.gguf";
  quantize_model(relu_model(DType::F16, 0.6), q4_k_m, *parse_quantize_target("q4_k_m"));
  expect_invariant(Model::load(q4_k_m), options(SparseMode::Predictor), "q4_k_m");
}

TEST(BatchInvariance, OracleModeAtEveryBatchSize) {
  for (const DType type : {DType::F16, DType::Q4_0}) {
    const auto m = Model::load(relu_model(type, 0.6));
    SCOPED_TRACE(dtype_name(type));
    const auto steps = all_logits(m, options(SparseMode::Oracle), 1);
    for (const int32_t b : {8, 9, 512}) {
      EXPECT_TRUE(same_bits(steps, all_logits(m, options(SparseMode::Oracle), b))) << "-b " << b;
    }
  }
}

// The server's prompt cache: a prompt that continues from a sequence's cached tokens (truncated
// back to the shared prefix) gives the logits of the prompt evaluated afresh, bit for bit.
TEST(BatchInvariance, ContinuingFromACacheGivesTheSameBits) {
  const auto m = Model::load(relu_model(DType::Q8_0, 0.7));
  const auto tokens = prompt();
  const std::span<const int32_t> all(tokens);
  Session fresh(m, options(SparseMode::Predictor));
  const auto want = fresh.eval(all.first(30));
  const std::vector<float> expected(want.begin(), want.end());
  Session cached(m, options(SparseMode::Predictor));
  cached.eval(all);  // a longer earlier request
  cached.truncate(0, 20);
  const auto got = cached.eval(all.subspan(20, 10));
  EXPECT_TRUE(same_bits(expected, {got.begin(), got.end()}));
}

// A SwiGLU model (n_embd 128, 2 layers, n_ff 512) in `type`, no thresholds of its own.
std::shared_ptr<const Model> swiglu_model(DType type) {
  SynthOptions so = test::tiny_synth_options(type);
  so.n_embd = 128;
  so.n_ff = 512;
  const std::string path = test::temp_dir() + "/swiglu-" + std::string(dtype_name(type)) + ".gguf";
  write_synthetic_model(so, path);
  return Model::load(path);
}

// Threshold options with model-wide thresholds: every projection's input, and down's.
SessionOptions model_wide(const Model& m) {
  SessionOptions o = options(SparseMode::Threshold);
  o.thresholds.assign(static_cast<size_t>(m.config().n_layer),
                      LayerThresholds{0.4f, 0.01f, 0.4f, 0.0f, 0.002f});
  return o;
}

// Threshold mode with FFN-only thresholds and with model-wide ones (every projection's input);
// the model is narrower than input_major_min_width, so decode steps read the file's matrices.
TEST(BatchInvariance, ThresholdModeAtEveryBatchSize) {
  const auto m = swiglu_model(DType::F16);
  SessionOptions ffn = options(SparseMode::Threshold);
  ffn.thresholds.assign(static_cast<size_t>(m->config().n_layer),
                        LayerThresholds{0, 0, 0, 0.02f, 0.002f});
  expect_invariant(m, ffn, "FFN thresholds");
  SessionOptions o = model_wide(*m);
  SparseStats stats;
  all_logits(m, o, 512, &stats);
  EXPECT_GT(stats.input_sparsity(), 0.1) << "the inputs are thresholded";
  expect_invariant(m, o, "model-wide thresholds");
}

// Through float input-major copies (made for models this wide and wider; BF16's are F32): decode
// steps read them in the dense products' lane order (lane_matvec), so sparse prompts, the
// default there, may take the file's matrices and still give every token its decode step's bits.
TEST(BatchInvariance, FloatInputMajorCopies) {
  for (const DType type : {DType::F32, DType::F16, DType::BF16}) {
    const auto m = swiglu_model(type);
    SCOPED_TRACE(dtype_name(type));
    SessionOptions o = model_wide(*m);
    o.input_major_min_width = 0;
    expect_invariant(m, o, "model-wide thresholds, input-major copies");
  }
}

// The same through requantized copies (a Q4_0 model's are Q4_0 again, rounded a second time):
// sparse prompts read the copies token by token, and are not the default.
TEST(BatchInvariance, QuantizedInputMajorCopies) {
  const auto m = swiglu_model(DType::Q4_0);
  SessionOptions o = model_wide(*m);
  o.input_major_min_width = 0;
  EXPECT_FALSE(same_bits(all_logits(m, o, 1), all_logits(m, o, 512))) << "dense prompts by default";
  o.sparse_prompt = true;
  expect_invariant(m, o, "q4_0, input-major copies");
}

// Dense prompts (PowerInfer's prefill) before sparse decode steps: the sessions these tests make.
struct DensePromptCase {
  std::string what;
  std::shared_ptr<const Model> model;
  SessionOptions options;
};

std::vector<DensePromptCase> dense_prompt_cases() {
  std::vector<DensePromptCase> cases;
  SessionOptions predictor = options(SparseMode::Predictor);
  predictor.sparse_prompt = false;
  cases.push_back({"predictor, q4_0", Model::load(relu_model(DType::Q4_0, 0.8)), predictor});
  // Decode steps through requantized input-major copies, whose sessions keep dense prompts.
  const auto q4_0 = swiglu_model(DType::Q4_0);
  SessionOptions copies = model_wide(*q4_0);
  copies.input_major_min_width = 0;
  cases.push_back({"model-wide thresholds, q4_0 copies", q4_0, copies});
  return cases;
}

std::vector<float> copy_of(std::span<const float> logits) { return {logits.begin(), logits.end()}; }

// The prompt, fed to eval_prompt in pieces of n_batch tokens, then `steps` generated tokens one at
// a time: the logits after the prompt and after each step.
std::vector<float> prompt_then_steps(const DensePromptCase& c, int32_t n_batch, bool marked) {
  SessionOptions o = c.options;
  o.n_batch = n_batch;
  Session s(c.model, o);
  const auto tokens = prompt();
  std::vector<float> out = copy_of(marked ? s.eval_prompt(tokens) : s.eval(tokens));
  for (const int32_t t : {5, 77, 140, 9}) {
    const auto l = s.eval({&t, 1});
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// A prompt marked as one runs dense however it is cut into passes, so it leaves the same cache
// and the decode steps after it the same bits; unmarked pieces of at most 8 tokens would run as
// decode steps, which the test checks it can see.
TEST(BatchInvariance, DensePromptsGiveTheSameBitsInPiecesOfAnySize) {
  for (const DensePromptCase& c : dense_prompt_cases()) {
    SCOPED_TRACE(c.what);
    const auto whole = prompt_then_steps(c, 512, true);
    for (const int32_t b : {1, 3, 8, 9}) {
      EXPECT_TRUE(same_bits(whole, prompt_then_steps(c, b, true))) << "-b " << b;
    }
    EXPECT_FALSE(same_bits(whole, prompt_then_steps(c, 8, false))) << "unmarked pieces of 8";
    SessionOptions sparse = c.options;
    sparse.sparse_prompt = true;
    EXPECT_FALSE(same_bits(whole, prompt_then_steps({c.what, c.model, sparse}, 512, true)))
        << "the prompt ran dense";
  }
}

// A decode step gets its lone pass's bits beside another sequence's prompt piece (marked, of 3 or
// 20 tokens) and among 11 other sequences' decode steps (more than a sparse group holds).
TEST(BatchInvariance, DecodeStepsBesidePromptsAndManySequences) {
  constexpr int32_t kSeqs = 12;
  const auto tokens = prompt();
  const std::span<const int32_t> all(tokens);
  for (const DensePromptCase& c : dense_prompt_cases()) {
    SCOPED_TRACE(c.what);
    SessionOptions o = c.options;
    o.n_seq = kSeqs;
    o.n_batch = 64;
    const int32_t step = 42;
    const auto n_vocab = static_cast<size_t>(c.model->config().n_vocab);
    // Sequence s holds the prompt's first 10 + s tokens.
    const auto start = [&](Session& s) {
      for (int32_t q = 0; q < kSeqs; ++q) {
        const SeqTokens chunk{q, all.first(static_cast<size_t>(10 + q)), true};
        std::vector<float> logits(n_vocab);
        s.eval_batch({&chunk, 1}, logits);
      }
    };
    Session alone(c.model, o);
    start(alone);
    std::vector<std::vector<float>> want(kSeqs, std::vector<float>(n_vocab));
    for (int32_t q = 0; q < kSeqs; ++q) {
      const SeqTokens chunk{q, {&step, 1}};
      alone.eval_batch({&chunk, 1}, want[static_cast<size_t>(q)]);
    }
    for (const size_t piece : {size_t{3}, size_t{20}}) {
      Session beside(c.model, o);
      start(beside);
      const std::vector<SeqTokens> batch{{0, {&step, 1}}, {1, all.subspan(11, piece), true}};
      std::vector<float> logits(2 * n_vocab);
      beside.eval_batch(batch, logits);
      EXPECT_TRUE(same_bits(want[0], {logits.begin(), logits.begin() + n_vocab}))
          << "beside a prompt piece of " << piece;
    }
    Session many(c.model, o);
    start(many);
    std::vector<SeqTokens> batch;
    for (int32_t q = 0; q < kSeqs; ++q) batch.push_back({q, {&step, 1}});
    std::vector<float> logits(kSeqs * n_vocab);
    many.eval_batch(batch, logits);
    for (int32_t q = 0; q < kSeqs; ++q) {
      const auto at = logits.begin() + static_cast<ptrdiff_t>(q * n_vocab);
      EXPECT_TRUE(same_bits(want[static_cast<size_t>(q)], {at, at + n_vocab})) << "sequence " << q;
    }
  }
}

}  // namespace
}  // namespace hearth
