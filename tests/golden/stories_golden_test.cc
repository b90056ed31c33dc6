// Golden outputs of real pretrained models (../shared/models, see its README): greedy decoding
// from BOS must reproduce the reference token ids and text exactly.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "ops/vec.h"

namespace hearth {
namespace {

using test::read_ids;

std::vector<int32_t> greedy(const std::string& model_path, int n, const SessionOptions& options) {
  return test::greedy_ids(Model::load(model_path), n, options);
}

struct Golden {
  const char* model;
  const char* stem;
};

class StoriesGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(StoriesGolden, GreedyIdsMatchAcrossThreadsAndKvTypes) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto expected = read_ids(shared + "/models/" + GetParam().stem + ".greedy250.ids");
  ASSERT_EQ(expected.size(), 250u);
  for (const int threads : {1, 2}) {
    for (const KvType kv : {KvType::F16, KvType::F32}) {
      SessionOptions o;
      o.n_threads = threads;
      o.kv_type = kv;
      EXPECT_EQ(greedy(shared + "/models/" + GetParam().model, 250, o), expected)
          << "threads " << threads << ", kv " << (kv == KvType::F16 ? "f16" : "f32");
    }
  }
}

TEST_P(StoriesGolden, CliPrintsTheGoldenText) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto r = test::run_hearth({"run", "-m", shared + "/models/" + GetParam().model, "-n", "250",
                                   "--temp", "0", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected = test::read_file(shared + "/models/" + GetParam().stem + ".greedy250.txt");
  EXPECT_EQ(test::trim(r.out), test::trim(expected));
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << "timings go to stderr";
}

// Prompt processing in one batch must give the same continuation as feeding the same tokens one
// at a time (matrix-matrix vs matrix-vector kernels, batched vs single-token attention).
TEST_P(StoriesGolden, BatchedPromptEqualsTokenByToken) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto ids = read_ids(shared + "/models/" + GetParam().stem + ".greedy250.ids");
  const auto model = Model::load(shared + "/models/" + GetParam().model);
  std::vector<int32_t> prompt = {model->bos()};
  prompt.insert(prompt.end(), ids.begin(), ids.begin() + 100);
  SessionOptions o;
  o.n_threads = 2;
  o.kv_type = KvType::F32;
  Session batched(model, o), single(model, o);
  const auto a = batched.eval(prompt);
  std::vector<float> logits_a(a.begin(), a.end());
  std::span<const float> b;
  for (const int32_t t : prompt) b = single.eval({&t, 1});
  ASSERT_EQ(logits_a.size(), b.size());
  for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(logits_a[i], b[i], 2e-3f) << "logit " << i;
  EXPECT_EQ(argmax(logits_a.data(), static_cast<int64_t>(logits_a.size())), ids[100]);
}

// The ReGLU model's FFN neurons output exact zeros; oracle mode skips them, so it must reproduce
// the dense greedy text while computing only a tenth of the neurons (the model README measured a
// mean sparsity of 0.90 on held-out stories).
TEST(StoriesReluSparse, OracleGeneratesTheDenseTextAndReportsSparsity) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string path = shared + "/models/stories260K-relu.gguf";
  const auto expected = read_ids(shared + "/models/stories260K-relu.greedy250.ids");
  for (const int threads : {1, 2}) {
    SessionOptions o;
    o.n_threads = threads;
    o.sparse = SparseMode::Oracle;
    const auto model = Model::load(path);
    Session session(model, o);
    ASSERT_EQ(session.sparse_mode(), SparseMode::Oracle);
    std::vector<int32_t> out;
    const int32_t bos = model->bos();
    auto logits = session.eval({&bos, 1});
    for (int i = 0; i < 250; ++i) {
      const auto next = static_cast<int32_t>(argmax(logits.data(), static_cast<int64_t>(logits.size())));
      if (model->is_eog(next)) break;
      out.push_back(next);
      logits = session.eval({&next, 1});
    }
    EXPECT_EQ(out, expected) << "threads " << threads;
    const SparseStats& s = session.sparse_stats();
    EXPECT_EQ(s.tokens, 251u);
    EXPECT_EQ(s.neurons_total, 251u * 5 * 172);
    EXPECT_GT(s.sparsity(), 0.8) << "measured sparsity " << s.sparsity();
    EXPECT_LT(s.sparsity(), 0.97) << "measured sparsity " << s.sparsity();
  }
}

TEST(StoriesReluSparse, CliReportsSparsityAndDenseText) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto r = test::run_hearth({"run", "-m", shared + "/models/stories260K-relu.gguf", "-n",
                                   "250", "--temp", "0", "-t", "2", "--sparse", "oracle"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected = test::read_file(shared + "/models/stories260K-relu.greedy250.txt");
  EXPECT_EQ(test::trim(r.out), test::trim(expected));
  EXPECT_NE(r.err.find("sparsity"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Models, StoriesGolden,
                         ::testing::Values(Golden{"stories260K.gguf", "stories260K"},
                                           Golden{"stories260K-relu.gguf", "stories260K-relu"}),
                         [](const auto& info) {
                           return std::string(info.param.stem) == "stories260K" ? "SwiGLU" : "ReGLU";
                         });

}  // namespace
}  // namespace hearth
