// Calibration on the real models of ../shared (issue 4's must-show, on a subset of the text so the
// suite stays fast; docs/benchmarks.md has the full-text figures): predictors for the ReGLU
// stories260K-relu reach recall 0.95 per layer on the eval text and keep perplexity within 2% and
// greedy text within 95% of dense; FFN thresholds for the SwiGLU stories260K at 40% and 50%
// sparsity keep perplexity within 3% and 6%; model-wide thresholds reach 40% in every layer, and
// lose less with the residual stream in its principal axes; each
// calibrated file gives the same logits bits at any batch size. Calibrated on
// tinystories-calib.txt, measured on tinystories-eval.txt.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "calib/residual_rotation.h"
#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"

namespace hearth {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define HEARTH_SKIP_UNDER_SANITIZERS() GTEST_SKIP() << "minutes under ASan; run in the plain build"
#else
#define HEARTH_SKIP_UNDER_SANITIZERS()
#endif

calib::CalibrateOptions options(const std::string& shared) {
  calib::CalibrateOptions o;
  o.text = test::read_file(shared + "/data/tinystories-calib.txt");
  o.heldout_text = test::read_file(shared + "/data/tinystories-eval.txt");
  o.max_tokens = 150000;
  o.max_samples = 16384;
  o.epochs = 12;
  o.n_threads = 2;
  return o;
}

double perplexity(const std::string& model, const std::string& shared, const std::string& mode) {
  return test::cli_perplexity(model, shared + "/data/tinystories-eval.txt",
                              {"-c", "256", "--chunks", "100", "-t", "2", "--sparse", mode});
}

// Batch invariance on a calibrated file: the logits of every position of a prompt from the eval
// text are the same bits at -b 1, 8, 9 and 512.
void expect_batch_invariant(const std::string& path, SparseMode mode, const std::string& shared) {
  SCOPED_TRACE(path);
  const auto model = Model::load(path);
  const std::string text = test::read_file(shared + "/data/tinystories-eval.txt").substr(0, 300);
  const std::vector<int32_t> tokens = model->tokenize(text, true);
  const auto logits = [&](int32_t n_batch) {
    SessionOptions o;
    o.sparse = mode;
    o.n_batch = n_batch;
    o.n_threads = 2;
    Session s(model, o);
    std::vector<float> out(tokens.size() * static_cast<size_t>(model->config().n_vocab));
    s.eval_all(tokens, out);
    return out;
  };
  const std::vector<float> steps = logits(1);
  for (const int32_t b : {8, 9, 512}) {
    const std::vector<float> got = logits(b);
    EXPECT_EQ(std::memcmp(got.data(), steps.data(), steps.size() * sizeof(float)), 0) << "-b " << b;
  }
}

TEST(CalibrateGolden, StoriesReluPredictors) {
  HEARTH_SKIP_UNDER_SANITIZERS();
  HEARTH_REQUIRE_SHARED(shared);
  const auto model = Model::load(shared + "/models/stories260K-relu.gguf");
  const calib::CalibrationResult r = calib::calibrate(model, options(shared));
  for (size_t il = 0; il < r.report.layers.size(); ++il) {
    EXPECT_GE(r.report.layers[il].recall, 0.95) << "layer " << il;
    EXPECT_GT(r.report.layers[il].predicted_sparsity, 0.7) << "layer " << il;
  }
  const std::string out = test::temp_dir() + "/relu-calibrated.gguf";
  calib::write_calibrated_model(*model, r, out);
  const double dense = perplexity(out, shared, "dense");
  const double pred = perplexity(out, shared, "predictor");
  EXPECT_LT(pred, dense * 1.02) << "dense " << dense;

  const auto cal = Model::load(out);
  SessionOptions d, p;
  d.sparse = SparseMode::Dense;
  p.sparse = SparseMode::Predictor;
  const auto a = test::greedy_ids(cal, 200, d), b = test::greedy_ids(cal, 200, p);
  size_t same = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) same += a[i] == b[i];
  EXPECT_GE(same, 190u) << "of " << a.size() << " greedy tokens";
  expect_batch_invariant(out, SparseMode::Predictor, shared);
}

TEST(CalibrateGolden, StoriesSwiGluThresholds) {
  HEARTH_SKIP_UNDER_SANITIZERS();
  HEARTH_REQUIRE_SHARED(shared);
  const auto model = Model::load(shared + "/models/stories260K.gguf");
  const std::string dense_path = shared + "/models/stories260K.gguf";
  const double dense = perplexity(dense_path, shared, "dense");
  for (const auto& [sparsity, bound] : {std::pair{0.4, 1.03}, std::pair{0.5, 1.06}}) {
    calib::CalibrateOptions o = options(shared);
    o.max_tokens = 60000;
    o.sparsity = sparsity;
    o.kind = calib::CalibKind::Thresholds;
    const calib::CalibrationResult r = calib::calibrate(model, o);
    for (const auto& l : r.report.layers) EXPECT_NEAR(l.true_sparsity, sparsity, 0.02);
    const std::string out = test::temp_dir() + "/swiglu.gguf";
    calib::write_calibrated_model(*model, r, out);
    EXPECT_LT(perplexity(out, shared, "threshold"), dense * bound) << "sparsity " << sparsity;
    expect_batch_invariant(out, SparseMode::Threshold, shared);
  }
}

// Model-wide thresholds at 40%: every layer skips 40% of its projection weights on held-out text,
// in the model's own axes and with the residual stream in its sparse axes (what `hearth
// calibrate` does by default), and the rotation loses less. The perplexity bounds guard today's
// quality (+25% and +11.5% on the whole eval text, docs/benchmarks.md), far from TEAL's figures
// for 7B models: a model with a 64-wide residual has little to spare.
TEST(CalibrateGolden, StoriesModelWideThresholds) {
  HEARTH_SKIP_UNDER_SANITIZERS();
  HEARTH_REQUIRE_SHARED(shared);
  const std::string path = shared + "/models/stories260K.gguf";
  const double dense = perplexity(path, shared, "dense");
  calib::CalibrateOptions o = options(shared);
  o.heldout_text.clear();  // the search must not see the eval text
  o.max_tokens = 60000;
  o.search_tokens = 512;  // half the default: the suite's time
  o.sparsity = 0.4;
  const auto thresholds_of = [&](const std::shared_ptr<const Model>& model, const char* name) {
    const calib::CalibrationResult r = calib::calibrate(model, o);
    EXPECT_EQ(r.kind, calib::CalibKind::InputThresholds);
    for (const auto& l : r.report.layers) EXPECT_NEAR(l.true_sparsity, 0.4, 0.02) << name;
    const std::string out = test::temp_dir() + "/" + name + ".gguf";
    calib::write_calibrated_model(*model, r, out);
    expect_batch_invariant(out, SparseMode::Threshold, shared);
    return perplexity(out, shared, "threshold");
  };
  const double sparse = thresholds_of(Model::load(path), "model-wide");
  EXPECT_GT(sparse, dense) << "skipping 40% of the weights should cost something";
  EXPECT_LT(sparse, dense * 1.30);
  const std::string rotated = test::temp_dir() + "/stories-rotated.gguf";
  calib::rotate_for_calibration(Model::load(path), o, rotated);
  EXPECT_NEAR(perplexity(rotated, shared, "dense"), dense, 1e-3 * dense);
  const double sparse_rotated = thresholds_of(Model::load(rotated), "model-wide-rotated");
  EXPECT_LT(sparse_rotated, sparse * 0.93) << "dense " << dense;
  EXPECT_LT(sparse_rotated, dense * 1.15);
}

}  // namespace
}  // namespace hearth
