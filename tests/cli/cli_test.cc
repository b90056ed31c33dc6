// The `hearth` binary as a user meets it: commands that work, and bad input that must end in one
// clear error line and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf.h"

namespace hearth {
namespace {

using test::run_hearth;


using test::count_lines;
using test::expect_clean_error;

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir());
    model_ = new std::string(*dir_ + "/tiny.gguf");
    const auto r = run_hearth({"synth", "-o", *model_, "--n-embd", "64", "--n-layer", "2", "--n-ff",
                               "96", "--n-head", "4", "--n-head-kv", "2", "--n-vocab", "300",
                               "--n-ctx", "64", "--type", "f32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete model_;
  }
  static std::string* dir_;
  static std::string* model_;
};
std::string* Cli::dir_ = nullptr;
std::string* Cli::model_ = nullptr;

TEST_F(Cli, RunPrintsExactlyPromptThenText) {
  const auto r = run_hearth({"run", "-m", *model_, "-p", "hello world", "-n", "8", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("hello world", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("hello world").size());
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// Runs `args` without and with `flag`: both succeed and print the same text.
void expect_flag_keeps_text(const std::vector<std::string>& args, const std::string& flag) {
  const auto without = run_hearth(args);
  auto copy = args;
  copy.push_back(flag);
  const auto with = run_hearth(copy);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(without.out, with.out) << flag;
}

TEST_F(Cli, NoMmapGivesTheSameText) {
  expect_flag_keeps_text({"run", "-m", *model_, "-p", "hello", "-n", "12", "--temp", "0"},
                         "--no-mmap");
}

// A sparse model with measured frequencies is held most-active first unless --no-reorder: the
// same function, so dense greedy text is identical either way.
TEST_F(Cli, NeuronReorderKeepsTheText) {
  const std::string sparse = *dir_ + "/tiny-relu.gguf";
  const auto made = run_hearth({"synth", "-o", sparse, "--n-embd", "64", "--n-layer", "2",
                                "--n-ff", "96", "--n-head", "4", "--n-head-kv", "2", "--n-vocab",
                                "300", "--n-ctx", "64", "--type", "f32", "--sparsity", "0.8"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  for (const char* mode : {"dense", "predictor"}) {
    expect_flag_keeps_text(
        {"run", "-m", sparse, "-p", "hello", "-n", "12", "--temp", "0", "--sparse", mode},
        "--no-reorder");
  }
}

TEST_F(Cli, SameSeedSameText) {
  const std::vector<std::string> args = {"run", "-m", *model_, "-p", "abc", "-n", "16", "--temp",
                                         "1.0", "--top-k", "0", "--top-p", "1", "--min-p", "0"};
  auto with_seed = [&](const char* seed) {
    auto a = args;
    a.insert(a.end(), {"--seed", seed});
    const auto r = run_hearth(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(with_seed("7"), with_seed("7"));
  EXPECT_NE(with_seed("7"), with_seed("8"));
}

TEST_F(Cli, EveryWeightTypeRuns) {
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0"}) {
    const std::string path = *dir_ + "/t_" + type + ".gguf";
    auto r = run_hearth({"synth", "-o", path, "--n-embd", "64", "--n-layer", "1", "--n-ff", "64",
                         "--n-head", "2", "--n-head-kv", "1", "--n-vocab", "300", "--type", type});
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    r = run_hearth({"run", "-m", path, "-p", "x", "-n", "4", "--temp", "0"});
    EXPECT_EQ(r.exit_code, 0) << type << ": " << r.err;
    r = run_hearth({"inspect", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string(type) + " "), std::string::npos) << type << "\n" << r.out;
  }
}

TEST_F(Cli, TokenizeIds) {
  auto r = run_hearth({"tokenize", "-m", *model_, "-p", "hi", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string plain = test::trim(r.out);
  EXPECT_FALSE(plain.empty());
  r = run_hearth({"tokenize", "-m", *model_, "-p", "hi", "--ids", "--bos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::trim(r.out), "1 " + plain);
}

TEST_F(Cli, InspectShowsHyperParametersAndTensors) {
  const auto r = run_hearth({"inspect", *model_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("n_embd 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.1.ffn_down.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer"), std::string::npos) << r.out;
}

TEST_F(Cli, UsageErrors) {
  auto r = run_hearth({});
  EXPECT_EQ(r.exit_code, 1);
  expect_clean_error(run_hearth({"frobnicate"}), "unknown command");
  expect_clean_error(run_hearth({"run", "-p", "x"}), "model");
  expect_clean_error(run_hearth({"run", "-m", *model_, "--bogus"}), "bogus");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-n", "abc"}), "n-predict");
  expect_clean_error(run_hearth({"run", "-m", *model_, "--top-p", "2"}), "top_p");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "a", "-f", "b"}), "either");
  expect_clean_error(run_hearth({"synth", "-o", *dir_ + "/x.gguf", "--n-embd", "60", "--n-head", "8"}),
                     "n-embd");
}

TEST_F(Cli, BadModelFiles) {
  expect_clean_error(run_hearth({"run", "-m", *dir_ + "/missing.gguf"}), "missing.gguf");
  const std::string text = *dir_ + "/text.gguf";
  test::write_file(text, "this is not a model file at all, just some text\n");
  expect_clean_error(run_hearth({"run", "-m", text}), "GGUF");
  expect_clean_error(run_hearth({"inspect", text}), "GGUF");

  const std::string full = test::read_file(*model_);
  for (const size_t cut : {size_t{0}, size_t{3}, size_t{24}, size_t{1000}, full.size() / 2, full.size() - 1}) {
    const std::string path = *dir_ + "/cut" + std::to_string(cut) + ".gguf";
    test::write_file(path, full.substr(0, cut));
    expect_clean_error(run_hearth({"run", "-m", path, "-n", "1"}), "cut" + std::to_string(cut));
    expect_clean_error(run_hearth({"run", "-m", path, "-n", "1", "--no-mmap"}), "cut" + std::to_string(cut));
  }
}

TEST_F(Cli, UnsupportedArchitectureAndType) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "mamba");
  const std::string arch = *dir_ + "/mamba.gguf";
  w.write(arch);
  expect_clean_error(run_hearth({"run", "-m", arch}), "unsupported architecture 'mamba'");

  // A llama model whose embedding is in a type Hearth has no kernels for (iq2_xxs): the error
  // names the tensor, its type and the supported list.
  gguf::GgufWriter l;
  l.set_string("general.architecture", "llama");
  l.set_u32("llama.embedding_length", 256);
  l.set_u32("llama.block_count", 1);
  l.set_u32("llama.feed_forward_length", 256);
  l.set_u32("llama.attention.head_count", 2);
  std::vector<uint8_t> blob(300 * 66);
  const int64_t ne[2] = {256, 300};
  l.add_tensor("token_embd.weight", 16, ne, blob.data(), blob.size());
  const std::string iq2 = *dir_ + "/iq2_xxs.gguf";
  l.write(iq2);
  const auto r = run_hearth({"run", "-m", iq2});
  expect_clean_error(r, "'token_embd.weight' has type iq2_xxs, which Hearth does not support");
  EXPECT_NE(r.err.find("q4_k, q5_k, q6_k, iq4_nl, iq4_xs"), std::string::npos) << r.err;
}

TEST_F(Cli, PromptLongerThanContext) {
  const std::string long_prompt(400, 'z');
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", long_prompt}), "context");
  expect_clean_error(run_hearth({"run", "-m", *model_, "-p", "hi", "-c", "-5"}), "ctx-size");
}

TEST_F(Cli, GenerationStopsAtTheContextEnd) {
  const auto r = run_hearth({"run", "-m", *model_, "-p", "a", "-n", "-1", "-c", "12", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("context is full"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hearth
