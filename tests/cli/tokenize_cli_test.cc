// `hearth tokenize --ids` reproduces llama.cpp's tokenizer test vectors (../shared/tokenizer).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"

namespace hearth {
namespace {

using test::split;

class TokenizeCli : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizeCli, MatchesEveryTestVector) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string vocab = shared + "/tokenizer/" + GetParam();
  const auto inputs = split(test::read_file(vocab + ".inp"), "\n__ggml_vocab_test__\n");
  const auto outputs = split(test::read_file(vocab + ".out"), "\n");
  ASSERT_GE(outputs.size(), inputs.size());
  const std::string dir = test::temp_dir();
  int checked = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) continue;  // -p "" would mean no prompt; the library test covers it
    const std::string file = dir + "/case" + std::to_string(i) + ".txt";
    test::write_file(file, inputs[i]);
    const auto r = test::run_hearth({"tokenize", "-m", vocab, "-f", file, "--ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(test::trim(r.out), test::trim(outputs[i])) << "case " << i << ": '" << inputs[i] << "'";
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizeCli,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"),
                         [](const auto& info) {
                           return std::string(info.param).find("spm") != std::string::npos ? "Spm" : "Gpt2";
                         });

}  // namespace
}  // namespace hearth
