// `hearth perplexity`: llama.cpp-style PPL on a text, clean errors, --kl-base against dense, and
// (with ../shared) the perplexity of the real TinyStories models on held-out stories.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace hearth {
namespace {

using test::run_hearth;


using test::count_lines;
using test::expect_clean_error;

// The number after `key` in `out` (NaN when absent).
double value_after(const std::string& out, const std::string& key) {
  const size_t at = out.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(out.c_str() + at + key.size(), nullptr);
}

std::string words(int n) {
  static const char* kWords[] = {"the", "little", "cat", "sat", "on", "a", "warm", "mat", "and",
                                 "looked", "at", "bird", "in", "tree", "while", "sun", "was", "up"};
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += kWords[(i * 7 + i / 5) % (sizeof kWords / sizeof *kWords)];
    s += i % 12 == 11 ? ".\n" : " ";
  }
  return s;
}

class PerplexityCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir());
    model_ = new std::string(*dir_ + "/ppl.gguf");
    text_ = new std::string(*dir_ + "/text.txt");
    const auto r = run_hearth({"synth", "-o", *model_, "--n-embd", "64", "--n-layer", "2", "--n-ff",
                               "96", "--n-head", "4", "--n-head-kv", "2", "--n-vocab", "300",
                               "--n-ctx", "64", "--type", "f32", "--act", "relu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    test::write_file(*text_, words(400));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete model_;
    delete text_;
  }
  static std::string* dir_;
  static std::string* model_;
  static std::string* text_;
};
std::string* PerplexityCli::dir_ = nullptr;
std::string* PerplexityCli::model_ = nullptr;
std::string* PerplexityCli::text_ = nullptr;

TEST_F(PerplexityCli, PrintsAFinitePerplexity) {
  const auto r = run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double ppl = value_after(r.out, "PPL = ");
  EXPECT_TRUE(std::isfinite(ppl)) << r.out;
  EXPECT_GT(ppl, 1.0) << r.out;
  EXPECT_NE(r.out.find(" +/- "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[1]"), std::string::npos) << r.err;  // progress per chunk
  EXPECT_NE(r.err.find("[2]"), std::string::npos) << r.err;
}

TEST_F(PerplexityCli, ChunksLimitsTheWork) {
  const auto all = run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "-t", "1"});
  const auto two = run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "-t", "1",
                               "--chunks", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("[2]"), std::string::npos) << two.err;
  EXPECT_EQ(two.err.find("[3]"), std::string::npos) << two.err;
  // The running PPL after chunk 2 is the final PPL of a two-chunk run.
  EXPECT_EQ(value_after(two.out, "PPL = "), value_after(all.err, "[2]")) << two.out << "\n" << all.err;
}

TEST_F(PerplexityCli, KlAgainstDenseIsZeroForDense) {
  const auto r = run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "-t", "2",
                             "--sparse", "dense", "--kl-base"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double kl = value_after(r.out, "KL divergence = ");
  ASSERT_TRUE(std::isfinite(kl)) << r.out;
  EXPECT_LT(std::fabs(kl), 1e-6) << r.out;
  EXPECT_EQ(value_after(r.out, "top-1 agreement = "), 100.0) << r.out;
  EXPECT_EQ(value_after(r.out, "dense PPL = "), value_after(r.out, "PPL = ")) << r.out;
}

TEST_F(PerplexityCli, DenseContextScoresDecodeSteps) {
  // A dense model computes the same function in one batch or in steps: the same perplexity to
  // rounding, over the same scored tokens.
  const auto batch = run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "-t", "2",
                                 "--sparse", "dense"});
  const auto steps = run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "-t", "2",
                                 "--sparse", "dense", "--dense-context"});
  ASSERT_EQ(steps.exit_code, 0) << steps.err;
  const double a = value_after(batch.out, "PPL = "), b = value_after(steps.out, "PPL = ");
  ASSERT_TRUE(std::isfinite(b)) << steps.out;
  EXPECT_NEAR(a, b, 1e-3 * a) << batch.out << steps.out;
}

TEST_F(PerplexityCli, CleanErrors) {
  const std::string shorter = *dir_ + "/short.txt";
  test::write_file(shorter, "the cat sat on the mat.");
  expect_clean_error(run_hearth({"perplexity", "-m", *model_, "-f", shorter, "-c", "32"}),
                     "needs at least 64");
  expect_clean_error(run_hearth({"perplexity", "-m", *model_, "-f", *dir_ + "/nothing.txt"}),
                     "nothing.txt");
  expect_clean_error(run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "128"}),
                     "exceeds the model's context of 64");
  expect_clean_error(run_hearth({"perplexity", "-m", *model_, "-f", *text_, "-c", "32", "--sparse",
                                 "predictor"}),
                     "predictor");
  expect_clean_error(run_hearth({"perplexity", "-m", *model_}), "file");
}

TEST(PerplexityShared, StoriesModelsOnHeldOutStories) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string text = shared + "/data/tinystories-eval.txt";
  for (const char* name : {"stories260K.gguf", "stories260K-relu.gguf"}) {
    const auto r = run_hearth({"perplexity", "-m", shared + "/models/" + name, "-f", text, "-c",
                               "256", "--chunks", "40"});
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const double ppl = value_after(r.out, "PPL = ");
    EXPECT_GT(ppl, 1.5) << name << ": " << r.out;
    EXPECT_LT(ppl, 6.0) << name << ": " << r.out;
  }
}

TEST(PerplexityShared, OracleMatchesDenseOnTheReluModel) {
  // Oracle mode skips only neurons whose activation is exactly zero: on a ReLU model its output is
  // dense's up to rounding.
  HEARTH_REQUIRE_SHARED(shared);
  const auto r = run_hearth({"perplexity", "-m", shared + "/models/stories260K-relu.gguf", "-f",
                             shared + "/data/tinystories-eval.txt", "-c", "128", "--chunks", "8",
                             "--sparse", "oracle", "--kl-base"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(std::fabs(value_after(r.out, "KL divergence = ")), 1e-5) << r.out;
  EXPECT_GT(value_after(r.out, "top-1 agreement = "), 99.0) << r.out;
  EXPECT_NE(r.out.find("sparsity = "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hearth
