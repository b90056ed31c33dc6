// The residual stream rotated to its principal axes (calib/residual_rotation.h): the rotated file
// computes the same function for every recipe that allows it (separate and fused projections,
// biases, head norms, tied and scaled embeddings), the axes are orthonormal and ordered, the
// recipes it cannot rotate are named, and `hearth calibrate` rotates float models by default.
#include "calib/residual_rotation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/synth.h"
#include "unit/arch_models.h"

namespace hearth {
namespace {

std::vector<int32_t> calibration_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(arch_test::kVocab) - 1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = id(rng);
  return t;
}

calib::ResidualRotation axes_of(const std::shared_ptr<const Model>& m) {
  return calib::principal_axes(m, calibration_tokens(300, 5), 64, 2, {});
}

// The principal axes refined for thresholds at 40% (calib/sparse_axes.h).
calib::ResidualRotation sparse_axes_of(const std::shared_ptr<const Model>& m) {
  return calib::sparse_axes(m, calibration_tokens(300, 5), 64, 2, 0.4, 20, {});
}

// The rotated file's dense logits against the original's, after a few steps of a prompt.
void expect_same_function(const arch_test::TinyModel& tiny, const std::string& name, double tol,
                          bool quantized = false, bool sparse = false) {
  SCOPED_TRACE(name);
  const auto original = Model::load(tiny.write(name + ".gguf"));
  ASSERT_EQ(calib::rotation_blocker(*original), "");
  const calib::ResidualRotation r = sparse ? sparse_axes_of(original) : axes_of(original);
  const std::string path = test::temp_dir() + "/" + name + "-rotated.gguf";
  const calib::RotatedModelReport rep = calib::write_rotated_model(*original, r, path, 2);
  EXPECT_GT(rep.rotated, 0);
  EXPECT_EQ(rep.requantized > 0, quantized);
  const auto rotated = Model::load(path);
  EXPECT_FALSE(rotated->config().tied_output);
  SessionOptions so;
  so.n_threads = 2;
  so.sparse = SparseMode::Dense;
  const std::vector<int32_t> prompt = calibration_tokens(13, 9);
  const std::vector<float> a = test::logits_in_steps(original, so, prompt, 5);
  const std::vector<float> b = test::logits_in_steps(rotated, so, prompt, 5);
  ASSERT_EQ(a.size(), b.size());
  double scale = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(a[i])));
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  EXPECT_LE(worst, tol * scale) << "largest logit " << scale;
  EXPECT_GT(worst, 0.0);  // the weights did change
}

TEST(ResidualRotation, SameFunctionForEveryRecipeItRotates) {
  expect_same_function(arch_test::make_qwen2(), "rot-qwen2", 1e-4);  // q/k/v biases
  expect_same_function(arch_test::make_qwen3(), "rot-qwen3", 1e-4);  // head norms, wide heads
  expect_same_function(arch_test::make_llama_narrow_heads(), "rot-llama", 1e-4);
  expect_same_function(arch_test::make_gemma(), "rot-gemma", 1e-4);  // tied, scaled embeddings
  expect_same_function(arch_test::make_phi3(0), "rot-phi3", 1e-4);   // fused qkv and gate|up
}

TEST(ResidualRotation, SparseAxesKeepTheFunction) {
  expect_same_function(arch_test::make_qwen2(), "rot-sparse-qwen2", 1e-4, false, true);
  expect_same_function(arch_test::make_gemma(), "rot-sparse-gemma", 1e-4, false, true);
}

TEST(ResidualRotation, QuantizedTensorsAreRoundedAgainInTheirOwnType) {
  arch_test::TinyModel q8 = arch_test::make_qwen3();
  q8.quantize(DType::Q8_0);
  expect_same_function(q8, "rot-qwen3-q8", 6e-2, /*quantized=*/true);
  // Only float and Q8_0 files are rotated by default: 4-bit blocks rounded twice cost more.
  EXPECT_TRUE(calib::rotation_rounds_finely(*Model::load(q8.write("rot-fine-q8.gguf"))));
  EXPECT_TRUE(calib::rotation_rounds_finely(
      *Model::load(arch_test::make_qwen3().write("rot-fine-f32.gguf"))));
  arch_test::TinyModel q4 = arch_test::make_qwen3();
  q4.quantize(DType::Q4_0);
  EXPECT_FALSE(calib::rotation_rounds_finely(*Model::load(q4.write("rot-fine-q4.gguf"))));
}

TEST(ResidualRotation, AxesAreOrthonormalAndOrderedByTheirShare) {
  const auto m = Model::load(arch_test::make_qwen2().write("rot-axes.gguf"));
  const calib::ResidualRotation r = axes_of(m);
  ASSERT_EQ(r.n, arch_test::kEmbd);
  for (int64_t i = 1; i < r.n; ++i) EXPECT_GE(r.variance[i - 1], r.variance[i]);
  EXPECT_GT(r.variance.back(), 0.0);
  for (int64_t i = 0; i < r.n; i += 7) {
    for (int64_t j = 0; j < r.n; j += 5) {
      double dot = 0;
      for (int64_t k = 0; k < r.n; ++k) dot += r.q[k * r.n + i] * r.q[k * r.n + j];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-9);
    }
  }
}

TEST(ResidualRotation, RecipesThatCannotRotateAreNamed) {
  const struct {
    arch_test::TinyModel model;
    const char* name;
    const char* why;
  } cases[] = {
      {arch_test::make_opt(false), "rot-opt.gguf", "LayerNorm"},
      {arch_test::make_falcon(false, false, 1), "rot-falcon.gguf", "LayerNorm"},
      {arch_test::make_gemma2(), "rot-gemma2.gguf", "output before the residual add"},
  };
  for (const auto& c : cases) {
    const auto m = Model::load(c.model.write(c.name));
    const std::string why = calib::rotation_blocker(*m);
    EXPECT_NE(why.find(c.why), std::string::npos) << c.name << ": " << why;
    EXPECT_THROW(calib::principal_axes(m, calibration_tokens(100, 1), 64, 1, {}), std::exception);
  }
  const std::string relu =
      test::write_skewed_sparse_model(DType::F32, test::temp_dir() + "/rot-relu.gguf");
  EXPECT_NE(calib::rotation_blocker(*Model::load(relu)).find("predictors"), std::string::npos);
}

TEST(ResidualRotation, CalibrateRotatesFloatModelsUnlessToldNot) {
  const std::string dir = test::temp_dir();
  const std::string model = dir + "/rot-cli.gguf";
  SynthOptions so = test::tiny_synth_options(DType::F32);
  so.n_ctx = 256;
  write_synthetic_model(so, model);
  const std::string calib_text = dir + "/rot-cli.txt";
  test::write_file(calib_text, test::random_words(6000, 4));
  auto calibrate = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"calibrate", "-m", model, "-f", calib_text, "--sparsity",
                                     "0.3",       "-t", "2",   "-o", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_hearth(args);
  };
  // Fewer refinement steps than the default: the suite's time under the sanitizers.
  const auto rotated = calibrate(dir + "/rot-cli-on.gguf", {"--rotation-steps", "20"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  EXPECT_NE(rotated.err.find("rotation: the residual stream in its sparse axes"),
            std::string::npos);
  const auto plain = calibrate(dir + "/rot-cli-off.gguf", {"--no-rotate"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("rotation:"), std::string::npos);
  const auto on = gguf::GgufFile::open(dir + "/rot-cli-on.gguf");
  const auto off = gguf::GgufFile::open(dir + "/rot-cli-off.gguf");
  EXPECT_EQ(on->get_bool("hearth.residual_rotation"), true);
  EXPECT_FALSE(off->has("hearth.residual_rotation"));
  // No scratch file stays behind.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".rotated."), std::string::npos) << e.path();
  }
  // Both files carry thresholds that --sparse auto picks up, and the rotated one's dense output
  // is the original's.
  for (const char* f : {"/rot-cli-on.gguf", "/rot-cli-off.gguf"}) {
    EXPECT_FALSE(Model::load(dir + f)->config().thresholds.empty()) << f;
  }
  const double ppl = test::cli_perplexity(model, calib_text, {"-c", "64", "--chunks", "4"});
  const double ppl_rotated = test::cli_perplexity(
      dir + "/rot-cli-on.gguf", calib_text, {"-c", "64", "--chunks", "4", "--sparse", "dense"});
  EXPECT_NEAR(ppl_rotated, ppl, 1e-3 * ppl);
  // Calibrating a rotated file again keeps its axes.
  const auto again =
      test::run_hearth({"calibrate", "-m", dir + "/rot-cli-on.gguf", "-f", calib_text, "--sparsity",
                        "0.3", "-t", "2", "-o", dir + "/rot-cli-again.gguf"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("principal axes already"), std::string::npos) << again.err;
  const std::string opt = arch_test::make_opt(false).write("rot-cli-opt-in.gguf");
  test::expect_clean_error(test::run_hearth({"calibrate", "-m", opt, "-f", calib_text, "--sparsity",
                                             "0.3", "--rotate", "-o", dir + "/rot-cli-opt.gguf"}),
                           "cannot be rotated");
}

}  // namespace
}  // namespace hearth
