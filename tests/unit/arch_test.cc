// The falcon and opt architectures end to end: tiny files (arch_models.h) whose logits must match
// the double-precision reference, prompt at once and token by token; their PowerInfer twins
// (magic PWRI, ffn_down_t, predictors of a different width per layer) in every sparse mode; and
// malformed files, refused with the tensor named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "core/error.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "model/synth.h"
#include "ops/attention_block.h"
#include "ops/rope.h"
#include "unit/arch_models.h"

namespace hearth {
namespace {

using namespace arch_test;

const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 150, 260, 7};

// ---- Helpers over Hearth's public API. ----

SessionOptions options(SparseMode mode) {
  SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  o.kv_type = KvType::F32;  // the reference keeps K and V exact
  o.sparse = mode;
  return o;
}

// max |got - ref| over the vector, relative to the largest |ref|.
double rel_diff(const float* got, const Vec& ref) {
  double diff = 0.0, scale = 1e-12;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / scale;
}

double rel_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  return rel_diff(got.data(), Vec(ref.begin(), ref.end()));
}

// Prompt at once (eval_all) and token by token (eval), both against the reference.
void expect_matches_reference(const TinyModel& m, const std::string& activation,
                              const std::string& path, SparseMode mode = SparseMode::Dense,
                              double tolerance = 1e-3, const LoadOptions& load = {}) {
  SCOPED_TRACE(path + " (" + activation + ", " + to_string(mode) + ")");
  const auto model = Model::load(path, load);
  Reference ref(m, activation, mode == SparseMode::Predictor);
  std::vector<Vec> expected;
  for (int32_t t : kPrompt) expected.push_back(ref.step(t));

  Session batch(model, options(mode));
  std::vector<float> all(kPrompt.size() * kVocab);
  batch.eval_all(kPrompt, all);
  for (size_t t = 0; t < kPrompt.size(); ++t) {
    EXPECT_LT(rel_diff(all.data() + t * kVocab, expected[t]), tolerance) << "prompt token " << t;
  }
  Session single(model, options(mode));
  for (size_t t = 0; t < kPrompt.size(); ++t) {
    const auto logits = single.eval({&kPrompt[t], 1});
    EXPECT_LT(rel_diff(logits.data(), expected[t]), tolerance) << "decode step " << t;
  }
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Run {
  std::vector<int32_t> tokens;     // greedy continuation
  std::vector<float> prompt_logits;  // of the last prompt token
  std::vector<float> last_logits;
  SparseStats stats;
};

Run greedy(const std::shared_ptr<const Model>& model, SparseMode mode,
           const std::vector<int32_t>& prompt, int steps) {
  Session s(model, options(mode));
  Run r;
  auto logits = s.eval(prompt);
  r.prompt_logits.assign(logits.begin(), logits.end());
  for (int i = 0; i < steps; ++i) {
    const int32_t t = argmax(logits);
    r.tokens.push_back(t);
    logits = s.eval({&t, 1});
  }
  r.last_logits.assign(logits.begin(), logits.end());
  r.stats = s.sparse_stats();
  return r;
}

std::string load_error(const std::string& path) {
  try {
    Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded without error)";
}

// ---- Tests. ----

TEST(Falcon, ConfigFromMetadata) {
  const TinyModel m = make_falcon(false, false, 1);
  const auto model = Model::load(m.write("falcon7b.gguf"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "falcon");
  EXPECT_EQ(c.norm, NormType::Layer);
  EXPECT_EQ(c.rope_type, RopeType::Neox);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.ffn_act, FfnActivation::Gelu);  // dense GGUF: Falcon's own GELU
  EXPECT_FALSE(c.ffn_gated);
  EXPECT_FALSE(c.tied_output);
  EXPECT_FLOAT_EQ(c.norm_eps, kEps);

  const TinyModel s = make_falcon(true, false, 1);
  EXPECT_EQ(Model::load(s.write("falcon7b.pwri.gguf"))->config().ffn_act, FfnActivation::Relu);
}

TEST(Falcon, MatchesReferenceMultiQuery) {
  const TinyModel m = make_falcon(false, false, 1);
  expect_matches_reference(m, "gelu", m.write("falcon7b.gguf"));
}

TEST(Falcon, MatchesReferenceWithSecondNormAndGroupedKv) {
  TinyModel m = make_falcon(false, true, 2);
  m.act = "relu";
  expect_matches_reference(m, "relu", m.write("falcon40b.gguf"));
}

TEST(Qwen2, MatchesReference) {
  const TinyModel m = make_qwen2();
  const auto model = Model::load(m.write("qwen2.gguf"));
  EXPECT_EQ(model->config().rope_type, RopeType::Neox);
  EXPECT_TRUE(model->config().block.qkv_bias);
  expect_matches_reference(m, "silu", m.write("qwen2.gguf"));
  expect_matches_reference(m, "silu", m.write("qwen2.gguf"), SparseMode::Oracle);
}

TEST(Qwen3, MatchesReferenceWithHeadNormsAndWideHeads) {
  const TinyModel m = make_qwen3();
  const std::string path = m.write("qwen3.gguf");
  const auto model = Model::load(path);
  EXPECT_EQ(model->config().head_dim, 2 * kHeadDim);
  EXPECT_EQ(model->config().n_rot, 2 * kHeadDim);
  EXPECT_EQ(model->config().rope_type, RopeType::Neox);
  EXPECT_TRUE(model->config().block.qk_norm);
  EXPECT_FALSE(model->config().block.qkv_bias);
  expect_matches_reference(m, "silu", path);
  expect_matches_reference(m, "silu", path, SparseMode::Oracle);
  TinyModel q8 = make_qwen3();
  q8.quantize(DType::Q8_0);
  ASSERT_EQ(q8.at("blk.0.attn_output.weight").type, DType::Q8_0);
  expect_matches_reference(q8, "silu", q8.write("qwen3-q8.gguf"), SparseMode::Dense, 3e-2);
}

TEST(Qwen3, HeadWidthKeysAreChecked) {
  TinyModel m = make_qwen3();
  m.u32_keys["attention.value_length"] = 16;
  EXPECT_NE(load_error(m.write("qwen3-vlen.gguf")).find("value_length 16 differs from key_length 32"),
            std::string::npos);
  TinyModel no_norm = make_qwen3();
  no_norm.drop("blk.1.attn_k_norm.weight");
  EXPECT_NE(load_error(no_norm.write("qwen3-nonorm.gguf")).find("missing tensor 'blk.1.attn_k_norm.weight'"),
            std::string::npos);
  TinyModel narrow = make_qwen3();
  narrow.head_dim = kHeadDim;  // the file's q is still 128 wide: its shape no longer matches
  EXPECT_NE(load_error(narrow.write("qwen3-narrow.gguf")).find("blk.0.attn_q.weight"),
            std::string::npos);
}

TEST(Llama, HeadsNarrowerThanTheEmbeddingMatchTheReference) {
  const TinyModel m = make_llama_narrow_heads();
  const std::string path = m.write("llama-narrow.gguf");
  const auto model = Model::load(path);
  EXPECT_EQ(model->config().head_dim, kHeadDim / 2);
  EXPECT_EQ(model->config().rope_type, RopeType::Normal);
  expect_matches_reference(m, "silu", path);
  expect_matches_reference(m, "silu", path, SparseMode::Oracle);
}

TEST(Gemma, MatchesReferenceWithScaledEmbeddingsAndTiedOutput) {
  const TinyModel m = make_gemma();
  const std::string path = m.write("gemma.gguf");
  const auto model = Model::load(path);
  EXPECT_TRUE(model->config().block.scaled_embd);
  EXPECT_FALSE(model->config().block.post_norms);
  EXPECT_TRUE(model->config().tied_output);
  EXPECT_EQ(model->config().head_dim, 2 * kHeadDim);
  expect_matches_reference(m, "gelu", path);
  expect_matches_reference(m, "gelu", path, SparseMode::Oracle);
}

TEST(Gemma2, MatchesReferenceWithPostNormsSoftCapsAndAlternatingWindow) {
  const TinyModel m = make_gemma2();
  const std::string path = m.write("gemma2.gguf");
  const auto model = Model::load(path);
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.block.post_norms);
  EXPECT_TRUE(c.block.scaled_embd);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.ffn_act, FfnActivation::Gelu);
  EXPECT_EQ(c.layer_window(0), 3);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_FLOAT_EQ(c.attn_softcap, 3.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 2.0f);
  // The 7-token prompt outgrows layer 0's window of 3, and both caps are low enough to change
  // the logits.
  expect_matches_reference(m, "gelu", path);
  expect_matches_reference(m, "gelu", path, SparseMode::Oracle);
  // With Q8_0 weights (and activations quantized to 8 bits): the post-norms scale each half's
  // output, rounding error included, to unit RMS, and the capped logits are small, so the
  // difference relative to the largest logit is looser than the other models' 3%.
  TinyModel q8 = make_gemma2();
  q8.quantize(DType::Q8_0);
  expect_matches_reference(q8, "gelu", q8.write("gemma2-q8.gguf"), SparseMode::Dense, 6e-2);
}

TEST(Gemma3, MatchesReferenceWithTwoRopesAndOneGlobalLayerInSix) {
  const TinyModel m = make_gemma3();
  const std::string path = m.write("gemma3.gguf");
  const auto model = Model::load(path);
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.block.qk_norm);
  EXPECT_TRUE(c.block.post_norms);
  EXPECT_EQ(c.attn_softcap, 0.0f);
  for (int64_t il = 0; il < 6; ++il) EXPECT_EQ(c.sliding_layer(il), il != 5) << il;
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.5f);
  expect_matches_reference(m, "gelu", path);
  expect_matches_reference(m, "gelu", path, SparseMode::Oracle);
}

TEST(Gemma2, SoftCapsMustBeNonNegative) {
  TinyModel m = make_gemma2();
  m.f32_keys["attn_logit_softcapping"] = -1.0f;
  EXPECT_NE(load_error(m.write("gemma2-cap.gguf")).find("attn_logit_softcapping"),
            std::string::npos);
  TinyModel no_post = make_gemma2();
  no_post.drop("blk.0.post_ffw_norm.weight");
  EXPECT_NE(load_error(no_post.write("gemma2-post.gguf")).find("missing tensor 'blk.0.post_ffw_norm.weight'"),
            std::string::npos);
}

TEST(Phi3, MatchesReferenceWithSlidingWindow) {
  // A window of 3 over a 7-token prompt: the later tokens see only their last three positions.
  const TinyModel m = make_phi3(3);
  const auto model = Model::load(m.write("phi3.gguf"));
  EXPECT_EQ(model->config().n_swa, 3);
  EXPECT_TRUE(model->config().ffn_gated);  // gate|up fused in ffn_up
  expect_matches_reference(m, "silu", m.write("phi3.gguf"));
  // Without the window the same weights (the same draws) compute something else, so the window
  // is what the comparison above tested.
  const TinyModel wide = make_phi3(0);
  Reference ref(m, "silu"), ref_wide(wide, "silu");
  double moved = 0.0;
  for (const int32_t t : kPrompt) {
    const Vec a = ref.step(t), b = ref_wide.step(t);
    for (size_t i = 0; i < a.size(); ++i) moved = std::max(moved, std::abs(a[i] - b[i]));
  }
  EXPECT_GT(moved, 1e-3);
}

// Phi-3's LongRoPE: the short factors while the context fits the original one, the long ones
// past it, and rope.scaling.attn_factor on cos and sin, against the reference with the same.
TEST(Phi3, LongRopeFactorsFollowTheContextLength) {
  TinyModel m = make_phi3(0);
  m.add("rope_factors_long.weight", {kHeadDim / 2}, 1.0f, 3.0f);    // in [2, 4]
  m.add("rope_factors_short.weight", {kHeadDim / 2}, 0.25f, 1.0f);  // in [0.75, 1.25]
  m.u32_keys["rope.scaling.original_context_length"] = 32;
  m.f32_keys["rope.scaling.attn_factor"] = 1.2f;
  const auto model = Model::load(m.write("phi3-longrope.gguf"));
  EXPECT_EQ(model->config().rope_n_ctx_orig, 32);
  EXPECT_FLOAT_EQ(model->config().rope_attn_factor, 1.2f);
  std::vector<float> last_logits[2];
  for (const int64_t n_ctx : {16, 64}) {
    SCOPED_TRACE("n_ctx " + std::to_string(n_ctx));
    const char* factors = n_ctx > 32 ? "rope_factors_long.weight" : "rope_factors_short.weight";
    Reference ref(m, "silu", false, {&m.at(factors).data, 1.2});
    SessionOptions o = options(SparseMode::Dense);
    o.n_ctx = n_ctx;
    Session s(model, o);
    for (size_t t = 0; t < kPrompt.size(); ++t) {
      const auto logits = s.eval({&kPrompt[t], 1});
      EXPECT_LT(rel_diff(logits.data(), ref.step(kPrompt[t])), 1e-3) << "token " << t;
      if (t == kPrompt.size() - 1) last_logits[n_ctx > 32].assign(logits.begin(), logits.end());
    }
  }
  // The two sets move the logits apart, so the choice between them is what was tested.
  EXPECT_GT(rel_diff(last_logits[0], last_logits[1]), 1e-3);
}

TEST(Phi3, LongRopeNeedsBothFactorSets) {
  TinyModel m = make_phi3(0);
  m.add("rope_factors_long.weight", {kHeadDim / 2}, 1.0f, 3.0f);
  EXPECT_NE(load_error(m.write("phi3-long-only.gguf")).find("rope_factors_short"),
            std::string::npos);
  m.add("rope_factors_short.weight", {kHeadDim / 2}, 0.25f, -1.0f);  // negative divisors
  EXPECT_NE(load_error(m.write("phi3-negative.gguf")).find("must be positive"), std::string::npos);
}

// YaRN's keys (rope.scaling.type yarn, factor, original_context_length, beta_fast / beta_slow)
// reach the session's RoPE; other types and DeepSeek's log multiplier are refused by name.
TEST(Qwen2, YarnScalingIsReadFromTheFile) {
  TinyModel m = make_qwen2();
  m.string_keys["rope.scaling.type"] = "yarn";
  m.f32_keys["rope.scaling.factor"] = 4.0f;
  m.u32_keys["rope.scaling.original_context_length"] = 512;
  m.f32_keys["rope.scaling.yarn_beta_fast"] = 16.0f;
  const auto model = Model::load(m.write("qwen2-yarn.gguf"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.rope_ext_factor, 1.0f);
  EXPECT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.rope_n_ctx_orig, 512);
  const RopeParams rp = rope_params(c, 64);
  float low = 0, high = 0;
  yarn_corr_dims(static_cast<int>(c.n_rot), 512, c.rope_freq_base, 16.0f, 1.0f, &low, &high);
  EXPECT_EQ(rp.ext_factor, 1.0f);
  EXPECT_EQ(rp.corr_low, low);
  EXPECT_EQ(rp.corr_high, high);
  // The session runs with it, and differs from the same file without YaRN.
  TinyModel plain = make_qwen2();
  Session a(model, options(SparseMode::Dense));
  Session b(Model::load(plain.write("qwen2-plain.gguf")), options(SparseMode::Dense));
  std::vector<float> la, lb;
  for (const int32_t t : kPrompt) {
    const auto x = a.eval({&t, 1});
    la.assign(x.begin(), x.end());
    const auto y = b.eval({&t, 1});
    lb.assign(y.begin(), y.end());
  }
  EXPECT_GT(rel_diff(la, lb), 1e-3);

  m.string_keys["rope.scaling.type"] = "longrope";
  EXPECT_NE(load_error(m.write("qwen2-longrope-type.gguf"))
                .find("rope.scaling.type 'longrope' is not supported"),
            std::string::npos);
  m.string_keys["rope.scaling.type"] = "yarn";
  m.f32_keys["rope.scaling.yarn_log_multiplier"] = 0.1f;
  EXPECT_NE(load_error(m.write("qwen2-yarn-log.gguf")).find("yarn_log_multiplier is not supported"),
            std::string::npos);
}

TEST(Opt, ConfigFromMetadata) {
  const TinyModel m = make_opt(false);
  const auto model = Model::load(m.write("opt.gguf"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "opt");
  EXPECT_EQ(c.norm, NormType::Layer);
  EXPECT_EQ(c.rope_type, RopeType::None);
  EXPECT_EQ(c.ffn_act, FfnActivation::Relu);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.n_ctx_train, kOptPositions - kOptOffset);  // the positions it has embeddings for
}

TEST(Opt, MatchesReference) {
  const TinyModel m = make_opt(false);
  expect_matches_reference(m, "relu", m.write("opt.gguf"));
}

TEST(Opt, ContextEndsWithTheLearnedPositions) {
  const TinyModel m = make_opt(false);
  const auto model = Model::load(m.write("opt.gguf"));
  SessionOptions o = options(SparseMode::Dense);
  o.n_ctx = 0;
  EXPECT_EQ(Session(model, o).n_ctx(), kOptPositions - kOptOffset);
  o.n_ctx = kOptPositions + 8;  // asked for more than the table holds
  Session s(model, o);
  std::vector<int32_t> tokens(kOptPositions - kOptOffset, 5);
  s.eval(tokens);
  const int32_t one = 6;
  try {
    s.eval({&one, 1});
    FAIL() << "evaluated a position past the learned ones";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("learned positions"), std::string::npos) << e.what();
  }
}

// PowerInfer's files: dense matches the (ReLU) reference; oracle equals dense; predictor runs.
void check_sparse_modes(const TinyModel& m, const std::string& path) {
  SCOPED_TRACE(path);
  const auto model = Model::load(path);
  ASSERT_TRUE(model->is_powerinfer());
  ASSERT_TRUE(model->has_predictors());
  EXPECT_EQ(model->config().ffn_act, FfnActivation::Relu);
  expect_matches_reference(m, "relu", path, SparseMode::Dense);
  expect_matches_reference(m, "relu", path, SparseMode::Oracle);
  expect_matches_reference(m, "relu", path, SparseMode::Predictor);  // checks the predictor's input

  // A prompt longer than the sparse path's batch takes the dense kernels with masks.
  std::vector<int32_t> long_prompt = kPrompt;
  for (int32_t t : {33, 44, 55, 66, 77, 88}) long_prompt.push_back(t);
  for (const auto& prompt : {kPrompt, long_prompt}) {
    const Run dense = greedy(model, SparseMode::Dense, prompt, 16);
    const Run oracle = greedy(model, SparseMode::Oracle, prompt, 16);
    EXPECT_EQ(dense.tokens, oracle.tokens);
    EXPECT_LT(rel_diff(oracle.prompt_logits, dense.prompt_logits), 1e-4);
    EXPECT_LT(rel_diff(oracle.last_logits, dense.last_logits), 1e-4);
    EXPECT_LT(oracle.stats.neurons_active, oracle.stats.neurons_total);  // ReLU zeros skipped
    EXPECT_GT(oracle.stats.neurons_active, 0u);

    const Run pred = greedy(model, SparseMode::Predictor, prompt, 16);
    for (float v : pred.last_logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(pred.tokens.size(), 16u);
    EXPECT_GT(pred.stats.neurons_total, 0u);
    EXPECT_LE(pred.stats.neurons_active, pred.stats.neurons_total);
  }
}

TEST(ArchSparse, FalconPowerInferFileRunsInEveryMode) {
  const TinyModel m = make_falcon(true, false, 1);
  check_sparse_modes(m, m.write("falcon.pwri.gguf"));
}

TEST(ArchSparse, Falcon40bPowerInferFileRunsInEveryMode) {
  const TinyModel m = make_falcon(true, true, 2);
  check_sparse_modes(m, m.write("falcon40b.pwri.gguf"));
}

TEST(ArchSparse, OptPowerInferFileRunsInEveryMode) {
  const TinyModel m = make_opt(true);
  check_sparse_modes(m, m.write("opt.pwri.gguf"));
}

TEST(ArchSparse, OracleOnPlainGgufFilesEqualsDense) {
  // No ffn_down_t: the sparse modes transpose ffn_down at load; the biases still apply.
  for (TinyModel m : {make_opt(false), make_falcon(false, false, 1)}) {
    m.act = "relu";
    const std::string path = m.write(m.arch + "-relu.gguf");
    expect_matches_reference(m, "relu", path, SparseMode::Oracle);
    const auto model = Model::load(path);
    EXPECT_EQ(greedy(model, SparseMode::Dense, kPrompt, 16).tokens,
              greedy(model, SparseMode::Oracle, kPrompt, 16).tokens);
  }
}

// Qwen2 and Phi-3 take the sparse path as llama does: ReLU versions calibrate predictors with
// the same call as any model and run in every mode, on the host and split with the stand-in
// device; SwiGLU versions calibrate FFN thresholds, whose decode steps give a whole prompt's bits.
TEST(ArchSparse, RmsNormFamiliesCalibrateAndRunInEveryMode) {
  calib::CalibrateOptions co;
  co.text = test::random_words(6000, 1);
  co.heldout_text = test::random_words(1500, 2);
  co.window = 64;
  co.ranks = {16};
  co.epochs = 4;
  co.n_threads = 2;
  for (TinyModel m : {make_qwen2(), make_qwen3(), make_gemma2(), make_phi3(0)}) {
    SCOPED_TRACE(m.arch);
    m.act = "relu";
    const std::string path = m.write(m.arch + "-relu.gguf");
    expect_matches_reference(m, "relu", path, SparseMode::Oracle);
    LoadOptions hybrid;
    hybrid.device.device = "standin";
    hybrid.device.standin_gib = 1.0;
    // Room for the activation buffers, attention and part of the FFN; the rest on the host.
    hybrid.device.vram_budget_gib = (m.arch == "phi3" ? 0.62 : 0.45) / 1024;
    hybrid.device.n_ctx = 64;
    hybrid.device.n_batch = 64;  // the sessions of options(): n_ctx 64
    hybrid.device.sparse = SparseMode::Oracle;
    hybrid.device.kv_type = KvType::F32;  // as options(): the reference keeps K and V exact
    hybrid.device.reset_gpu_index = true;
    expect_matches_reference(m, "relu", path, SparseMode::Oracle, 1e-3, hybrid);
    const auto split = Model::load(path, hybrid);
    int64_t on_device = 0;
    for (const int64_t hot : split->impl().device_hot) on_device += hot;
    EXPECT_GT(on_device, 0) << split->placement_note();
    EXPECT_LT(on_device, kLayers * kFf) << split->placement_note();

    const std::string calibrated = test::temp_dir() + "/" + m.arch + "-pred.gguf";
    const auto model = Model::load(path);
    calib::write_calibrated_model(*model, calib::calibrate(model, co), calibrated);
    const auto pred = greedy(Model::load(calibrated), SparseMode::Predictor, kPrompt, 16);
    for (float v : pred.last_logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(pred.tokens.size(), 16u);
    EXPECT_GT(pred.stats.neurons_total, 0u);
    EXPECT_LT(pred.stats.neurons_active, pred.stats.neurons_total);
  }
  for (TinyModel m : {make_qwen2(), make_qwen3(), make_gemma2(), make_phi3(0)}) {
    SCOPED_TRACE(m.arch + " thresholds");
    const auto model = Model::load(m.write(m.arch + "-silu.gguf"));
    calib::CalibrateOptions to = co;
    to.kind = calib::CalibKind::Thresholds;
    to.sparsity = 0.5;
    const std::string calibrated = test::temp_dir() + "/" + m.arch + "-thr.gguf";
    calib::write_calibrated_model(*model, calib::calibrate(model, to), calibrated);
    const auto t = Model::load(calibrated);
    SessionOptions o = options(SparseMode::Threshold);
    o.sparse_prompt = true;
    Session whole(t, o);
    std::vector<float> all(kPrompt.size() * kVocab);
    whole.eval_all(kPrompt, all);
    Session steps(t, o);
    for (size_t i = 0; i < kPrompt.size(); ++i) {
      const auto logits = steps.eval({&kPrompt[i], 1});
      ASSERT_EQ(std::memcmp(logits.data(), all.data() + i * kVocab, kVocab * sizeof(float)), 0)
          << "token " << i;
    }
    EXPECT_GT(steps.sparse_stats().neurons_total, steps.sparse_stats().neurons_active);
  }
}

TEST(ArchSparse, OptHeldMostActiveFirstMatchesTheReference) {
  // OPT's up bias moves with its neurons; ffn_down, in file order, gets the activations back.
  TinyModel m = make_opt(false);
  m.act = "relu";
  const std::string path = m.write("opt-freq.gguf");
  add_activation_stats(path, 64, 7, 1);
  LoadOptions o;
  o.reorder_neurons = true;
  ASSERT_NE(Model::load(path, o)->impl().order(0), nullptr);
  for (const SparseMode mode : {SparseMode::Dense, SparseMode::Oracle}) {
    expect_matches_reference(m, "relu", path, mode, 1e-3, o);
  }
}

// Quantized matrices (falcon's Q, K and V are row ranges of one Q8_0 tensor): Hearth quantizes the
// activations to 8 bits as well, hence the looser tolerance.
TEST(ArchQuantized, Q8_0FilesMatchTheReference) {
  TinyModel falcon = make_falcon(false, true, 2);
  falcon.act = "relu";
  falcon.quantize(DType::Q8_0);
  ASSERT_EQ(falcon.at("blk.0.attn_qkv.weight").type, DType::Q8_0);
  expect_matches_reference(falcon, "relu", falcon.write("falcon-q8.gguf"), SparseMode::Dense, 3e-2);
  TinyModel opt = make_opt(true);
  opt.quantize(DType::Q8_0);
  const std::string path = opt.write("opt-q8.pwri.gguf");
  expect_matches_reference(opt, "relu", path, SparseMode::Dense, 3e-2);
  expect_matches_reference(opt, "relu", path, SparseMode::Oracle, 3e-2);
}

TEST(ArchMalformed, MissingBiasIsNamed) {
  TinyModel opt = make_opt(false);
  opt.drop("blk.1.attn_q.bias");
  EXPECT_NE(load_error(opt.write("bad.gguf")).find("missing tensor 'blk.1.attn_q.bias'"),
            std::string::npos);

  TinyModel pwri = make_opt(true);
  pwri.drop("blk.0.ffn_down_t.bias");
  EXPECT_NE(load_error(pwri.write("bad.gguf")).find("missing tensor 'blk.0.ffn_down_t.bias'"),
            std::string::npos);

  TinyModel falcon = make_falcon(false, false, 1);
  falcon.drop("blk.0.attn_norm.bias");
  EXPECT_NE(load_error(falcon.write("bad.gguf")).find("missing tensor 'blk.0.attn_norm.bias'"),
            std::string::npos);

  TinyModel f40 = make_falcon(false, true, 2);
  f40.drop("blk.1.attn_norm_2.bias");
  EXPECT_NE(load_error(f40.write("bad.gguf")).find("missing tensor 'blk.1.attn_norm_2.bias'"),
            std::string::npos);

  TinyModel no_pos = make_opt(false);
  no_pos.drop("position_embd.weight");
  EXPECT_NE(load_error(no_pos.write("bad.gguf")).find("missing tensor 'position_embd.weight'"),
            std::string::npos);
}

TEST(ArchMalformed, WrongShapesAreNamed) {
  TinyModel falcon = make_falcon(false, false, 1);
  // As if the file had a K and V head per query head (n_head_kv 4), while the metadata says 1.
  falcon.reshape("blk.1.attn_qkv.weight", {kEmbd, 3 * kEmbd});
  const std::string err = load_error(falcon.write("bad.gguf"));
  EXPECT_NE(err.find("tensor 'blk.1.attn_qkv.weight' has shape [64, 192], expected [64, 96]"),
            std::string::npos) << err;

  TinyModel opt = make_opt(false);
  opt.reshape("blk.0.ffn_up.bias", {kEmbd});
  const std::string err2 = load_error(opt.write("bad.gguf"));
  EXPECT_NE(err2.find("tensor 'blk.0.ffn_up.bias' has shape [64], expected [256]"),
            std::string::npos) << err2;

  TinyModel short_pos = make_opt(false);
  short_pos.reshape("position_embd.weight", {kEmbd, 2});
  const std::string err3 = load_error(short_pos.write("bad.gguf"));
  EXPECT_NE(err3.find("position_embd.weight"), std::string::npos) << err3;
}

TEST(ArchMalformed, FalconLayoutOtherThanJploskiIsRefused) {
  TinyModel m = make_falcon(false, false, 1);
  m.layout = "interleaved";
  const std::string err = load_error(m.write("bad.gguf"));
  EXPECT_NE(err.find("falcon.tensor_data_layout"), std::string::npos) << err;
}

}  // namespace
}  // namespace hearth
