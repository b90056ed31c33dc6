// hearth calibrate end to end on a small synthetic ReLU model (made here by `hearth synth`, so
// the test needs no ../shared): predictors trained natively reach the recall target on held-out
// text, the calibrated file runs in --sparse auto with perplexity close to dense, thresholds give
// the requested sparsity on a SwiGLU model, calibration is deterministic, and bad input fails
// clearly without leaving a file behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "calib/calibrate.h"
#include "common/test_util.h"
#include "core/error.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/synth.h"

namespace hearth {
namespace {

SynthOptions tiny(FfnActivation act) {
  SynthOptions o;
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_ff = 256;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_vocab = 320;
  o.n_ctx = 256;
  o.type = DType::F32;
  o.act = act;
  if (act == FfnActivation::Relu) o.sparsity = 0.85;
  return o;
}

std::string words(size_t chars, uint32_t seed) { return test::random_words(chars, seed); }

std::string synth_model(FfnActivation act) {
  const std::string path = test::temp_dir() + "/model.gguf";
  write_synthetic_model(tiny(act), path);
  return path;
}

calib::CalibrateOptions options() {
  calib::CalibrateOptions o;
  o.text = words(12000, 1);
  o.heldout_text = words(3000, 2);
  o.window = 128;
  o.ranks = {16, 32};
  o.epochs = 12;
  o.n_threads = 2;
  return o;
}

double perplexity_of(const std::string& model, const std::string& text, const std::string& mode) {
  const std::string file = test::temp_dir() + "/eval.txt";
  test::write_file(file, text);
  return test::cli_perplexity(model, file, {"-c", "128", "-t", "2", "--sparse", mode});
}

TEST(CalibrateSlow, PredictorsReachRecallAndKeepPerplexity) {
  const std::string path = synth_model(FfnActivation::Relu);
  const auto model = Model::load(path);
  const calib::CalibrationResult r = calib::calibrate(model, options());
  ASSERT_EQ(r.kind, calib::CalibKind::Predictors);
  ASSERT_EQ(r.report.layers.size(), 2u);
  for (const auto& l : r.report.layers) {
    EXPECT_GE(l.recall, 0.95) << "held-out recall";
    EXPECT_GT(l.predicted_sparsity, 0.5);
    EXPECT_GT(l.true_sparsity, 0.7);
    EXPECT_TRUE(l.predictor_rank == 16 || l.predictor_rank == 32);
  }
  const std::string out = test::temp_dir() + "/calibrated.gguf";
  calib::write_calibrated_model(*model, r, out);

  const auto cal = Model::load(out);
  EXPECT_TRUE(cal->has_predictors());
  ASSERT_EQ(cal->config().predictor_thresholds.size(), 2u);
  SessionOptions so;
  so.n_threads = 2;
  Session s(cal, so);
  EXPECT_EQ(s.sparse_mode(), SparseMode::Predictor);  // auto picks the new predictors

  const std::string eval = words(6000, 3);
  const double dense = perplexity_of(out, eval, "dense");
  const double pred = perplexity_of(out, eval, "predictor");
  EXPECT_LT(std::fabs(pred / dense - 1.0), 0.02) << "dense " << dense << ", predictor " << pred;

  // The statistics travel with the file: the report can be made from it alone.
  const sparse::CalibReport back = calib::read_calib_report(*cal);
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.kind, "predictors");
  EXPECT_EQ(back.layers[0].freq, r.report.layers[0].freq);
  EXPECT_FLOAT_EQ(static_cast<float>(back.layers[1].recall),
                  static_cast<float>(r.report.layers[1].recall));
}

TEST(Calibrate, DeterministicForASeed) {
  const auto model = Model::load(synth_model(FfnActivation::Relu));
  calib::CalibrateOptions o = options();
  o.ranks = {16};
  o.epochs = 3;
  const auto a = calib::calibrate(model, o);
  o.n_threads = 1;
  const auto b = calib::calibrate(model, o);
  ASSERT_EQ(a.predictors.size(), b.predictors.size());
  for (size_t i = 0; i < a.predictors.size(); ++i) {
    EXPECT_EQ(a.predictors[i].fc1, b.predictors[i].fc1);
    EXPECT_EQ(a.predictors[i].fc2, b.predictors[i].fc2);
    EXPECT_EQ(a.predictors[i].threshold, b.predictors[i].threshold);
  }
}

TEST(Calibrate, StagesRunAloneAndMatchOneRun) {
  // --stage profile saves the statistics and samples; --stage train trains from them later.
  const std::string path = synth_model(FfnActivation::Relu);
  const auto model = Model::load(path);
  calib::CalibrateOptions o = options();
  o.ranks = {16};
  o.epochs = 3;
  const auto whole = calib::calibrate(model, o);

  calib::CalibrateOptions po = o;
  po.kind = calib::CalibKind::ProfileOnly;
  const auto prof = calib::calibrate(model, po);
  EXPECT_TRUE(prof.predictors.empty());
  const std::string saved = test::temp_dir() + "/profile.gguf";
  calib::write_calibrated_model(*model, prof, saved);
  const auto profile = Model::load(saved);
  EXPECT_EQ(calib::read_calib_report(*profile).kind, "profile");
  const auto staged = calib::train_from_profile(profile, o);
  ASSERT_EQ(staged.predictors.size(), whole.predictors.size());
  for (size_t i = 0; i < whole.predictors.size(); ++i) {
    EXPECT_EQ(staged.predictors[i].fc1, whole.predictors[i].fc1);
    EXPECT_EQ(staged.predictors[i].threshold, whole.predictors[i].threshold);
    EXPECT_EQ(staged.report.layers[i].recall, whole.report.layers[i].recall);
  }
  // The trained file drops the samples; training needs a profile file.
  const std::string out = test::temp_dir() + "/staged.gguf";
  calib::write_calibrated_model(*profile, staged, out);
  const auto trained = Model::load(out);
  EXPECT_TRUE(trained->has_predictors());
  EXPECT_THROW(calib::read_profile(*trained), Error);
  EXPECT_THROW(calib::train_from_profile(model, o), Error);  // not calibrated at all
}

TEST(CalibrateSlow, ThresholdsReachTheRequestedSparsity) {
  const std::string path = synth_model(FfnActivation::Silu);
  const auto model = Model::load(path);
  calib::CalibrateOptions o = options();
  o.sparsity = 0.5;
  o.kind = calib::CalibKind::Thresholds;
  const auto r = calib::calibrate(model, o);
  ASSERT_EQ(r.kind, calib::CalibKind::Thresholds);
  ASSERT_EQ(r.thresholds.size(), 2u);
  for (const auto& l : r.report.layers) {
    EXPECT_NEAR(l.true_sparsity, 0.5, 0.05) << "held-out sparsity";
    EXPECT_GT(l.threshold, 0.0);
  }
  const std::string out = test::temp_dir() + "/thresholds.gguf";
  calib::write_calibrated_model(*model, r, out);
  const auto cal = Model::load(out);
  SessionOptions so;
  so.n_threads = 1;
  Session s(cal, so);
  ASSERT_EQ(s.sparse_mode(), SparseMode::Threshold);
  // Decode steps (the prompt runs dense) over text like the calibration's.
  const std::vector<int32_t> tokens = cal->tokenize(words(400, 5), false);
  s.eval(std::span(tokens).first(16));
  s.reset_stats();
  for (size_t i = 16; i < 48; ++i) s.eval(std::span(tokens).subspan(i, 1));
  EXPECT_NEAR(s.sparse_stats().sparsity(), 0.5, 0.1);
}

using test::logits_in_steps;

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(CalibrateSlow, ThresholdDecodeMatchesMaskedPrompt) {
  // One-token steps (gather/axpy with both stages), batches of a few tokens (the union of their
  // sets) and a masked prompt batch (dense kernels + masks) compute the same function.
  const auto model = Model::load(synth_model(FfnActivation::Silu));
  calib::CalibrateOptions co = options();
  co.sparsity = 0.5;
  co.kind = calib::CalibKind::Thresholds;
  const std::string out = test::temp_dir() + "/t.gguf";
  calib::write_calibrated_model(*model, calib::calibrate(model, co), out);
  const auto m = Model::load(out);
  const std::vector<int32_t> tokens = m->tokenize(words(200, 7), false);
  SessionOptions o;
  o.n_threads = 2;
  o.sparse = SparseMode::Threshold;
  o.sparse_prompt = true;
  const auto steps = logits_in_steps(m, o, tokens, 1);
  EXPECT_LT(max_diff(steps, logits_in_steps(m, o, tokens, tokens.size())), 2e-3f);
  EXPECT_LT(max_diff(steps, logits_in_steps(m, o, tokens, 5)), 2e-3f);
  SessionOptions dense = o;
  dense.sparse = SparseMode::Dense;
  EXPECT_GT(max_diff(steps, logits_in_steps(m, dense, tokens, 1)), 1e-3f)
      << "skipping half the neurons should change the output";
  // Without thresholds the mode is refused, naming what is missing.
  try {
    Session s(model, o);
    FAIL() << "threshold mode on a model without thresholds";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hearth.*_thresholds"), std::string::npos);
  }
}

TEST(Calibrate, BadInputFailsClearly) {
  const auto relu = Model::load(synth_model(FfnActivation::Relu));
  calib::CalibrateOptions o = options();
  o.text = "too short";
  EXPECT_THROW(calib::calibrate(relu, o), Error);
  o = options();
  o.text[100] = static_cast<char>(0xff);
  try {
    calib::calibrate(relu, o);
    FAIL() << "non-UTF-8 text was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
  }
  o = options();
  o.sparsity = 1.5;
  EXPECT_THROW(calib::calibrate(relu, o), Error);
  // A SwiGLU model has no exact zeros to predict: it needs --sparsity.
  const auto silu = Model::load(synth_model(FfnActivation::Silu));
  EXPECT_THROW(calib::calibrate(silu, options()), Error);
}

TEST(Calibrate, CliWritesModelAndReportAndFailsCleanly) {
  const std::string dir = test::temp_dir();
  const std::string model = synth_model(FfnActivation::Relu);
  test::write_file(dir + "/calib.txt", words(12000, 4));
  const std::string out = dir + "/out.gguf";
  auto r = test::run_hearth({"calibrate", "-m", model, "-f", dir + "/calib.txt", "-o", out,
                             "--predictor-rank", "16", "--epochs", "3", "-t", "2", "--report",
                             dir + "/report"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("profile:"), std::string::npos) << "progress on stderr";
  EXPECT_NE(r.out.find("layer 1: width 16"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(out));
  EXPECT_TRUE(std::filesystem::exists(dir + "/report/index.html"));

  // The report of an already calibrated model, without text.
  // Everything but the training loss (which the file does not keep) is the same.
  r = test::run_hearth({"calibrate", "-m", out, "--report", dir + "/again"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto table = [](const std::string& html) { return html.substr(html.find("<table>")); };
  EXPECT_EQ(table(test::read_file(dir + "/again/index.html")),
            table(test::read_file(dir + "/report/index.html")));

  test::write_file(dir + "/short.txt", "once upon a time");
  const std::string missing = dir + "/never.gguf";
  test::expect_clean_error(
      test::run_hearth({"calibrate", "-m", model, "-f", dir + "/short.txt", "-o", missing}),
      "too short");
  EXPECT_FALSE(std::filesystem::exists(missing));
  test::expect_clean_error(
      test::run_hearth({"calibrate", "-m", model, "-f", dir + "/calib.txt", "-o", missing,
                        "--predictor-rank", "x"}),
      "--predictor-rank");
  test::expect_clean_error(test::run_hearth({"calibrate", "-m", model, "--report", dir + "/r2"}),
                           "not a calibrated model");
  test::expect_clean_error(
      test::run_hearth({"calibrate", "-m", out, "--stage", "train", "-o", dir + "/t.gguf"}),
      "not a saved profile");
  // An output that cannot be written fails before the work starts.
  test::expect_clean_error(
      test::run_hearth({"calibrate", "-m", model, "-f", dir + "/calib.txt", "-o",
                        dir + "/no/such/dir/out.gguf"}),
      "no/such/dir");
}

}  // namespace
}  // namespace hearth
