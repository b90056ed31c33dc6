// llama.cpp's own tokenizer test vectors (../shared/tokenizer): every case must give exactly the
// ids llama.cpp gives, and decoding must give back the text.
#include <chrono>
#include <cstdio>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

namespace hearth::text {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

using test::split;

// The format is described in ../shared/tokenizer/README.md.
std::vector<Case> load_cases(const std::string& vocab_path) {
  const std::vector<std::string> texts =
      split(test::read_file(vocab_path + ".inp"), "\n__ggml_vocab_test__\n");
  const std::vector<std::string> lines = split(test::read_file(vocab_path + ".out"), "\n");
  EXPECT_EQ(texts.size(), lines.size()) << vocab_path;
  std::vector<Case> cases;
  for (size_t i = 0; i < std::min(texts.size(), lines.size()); ++i) {
    Case c{texts[i], {}};
    const std::string line = test::trim(lines[i]);
    if (!line.empty()) {
      for (const std::string& id : split(line, " ")) c.ids.push_back(std::stoi(id));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) {
    if (!s.empty()) s.push_back(' ');
    s.append(std::to_string(id));
  }
  return s;
}

void run_golden(const std::string& vocab_path, std::string_view model) {
  const auto file = gguf::GgufFile::open(vocab_path);
  const auto tokenizer = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tokenizer->model(), model);
  const std::vector<Case> cases = load_cases(vocab_path);
  ASSERT_GT(cases.size(), 40u);

  size_t passed = 0;
  size_t round_trips = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::vector<int32_t> ids = tokenizer->encode(c.text, false, false);
    if (ids == c.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << vocab_path << " case " << i << " '" << c.text
                    << "'\n  expected: " << show(c.ids) << "\n  got:      " << show(ids);
    }
    // Without BOS the first token's dummy-prefix space is dropped again, so the text comes back
    // byte for byte for both vocabulary types.
    const std::string back = tokenizer->decode(ids);
    if (back == c.text) {
      ++round_trips;
    } else {
      ADD_FAILURE() << vocab_path << " case " << i << " does not round-trip: '" << c.text
                    << "' -> '" << back << "'";
    }
  }
  std::printf("%s: %zu/%zu cases match llama.cpp, %zu/%zu round-trip\n", vocab_path.c_str(), passed,
              cases.size(), round_trips, cases.size());
}

TEST(TokenizerGolden, LlamaSentencePiece) {
  HEARTH_REQUIRE_SHARED(shared);
  run_golden(shared + "/tokenizer/ggml-vocab-llama-spm.gguf", "llama");
}

TEST(TokenizerGolden, Gpt2ByteLevelBpe) {
  HEARTH_REQUIRE_SHARED(shared);
  run_golden(shared + "/tokenizer/ggml-vocab-gpt-2.gguf", "gpt2");
}

TEST(TokenizerGolden, DeepSeekLlmByteLevelBpe) {
  HEARTH_REQUIRE_SHARED(shared);
  run_golden(shared + "/tokenizer/ggml-vocab-deepseek-llm.gguf", "gpt2");
}

TEST(TokenizerGolden, LlamaMetadataAndSpecialTokens) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto file = gguf::GgufFile::open(shared + "/tokenizer/ggml-vocab-llama-spm.gguf");
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos_default());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_TRUE(tok->is_control(1));
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_to_piece(15043), " Hello");

  EXPECT_EQ(tok->encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
  // With BOS first, the dummy-prefix space survives decoding, as in llama.cpp.
  EXPECT_EQ(tok->decode(tok->encode("Hello world", true, false)), " Hello world");
  // "<s>" and "</s>" in the text are only control tokens when asked for; the text after a special
  // token gets a dummy prefix of its own.
  EXPECT_EQ(tok->encode("<s>Hello</s>", false, true), (std::vector<int32_t>{1, 15043, 2}));
  const std::vector<int32_t> literal = tok->encode("<s>Hello</s>", false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 1), 0);
  EXPECT_EQ(tok->decode(literal), "<s>Hello</s>");
}

TEST(TokenizerGolden, Gpt2MetadataAndSpecialTokens) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto file = gguf::GgufFile::open(shared + "/tokenizer/ggml-vocab-gpt-2.gguf");
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok->n_vocab(), 50257);
  EXPECT_EQ(tok->bos(), 50256);
  EXPECT_EQ(tok->eos(), 50256);
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_TRUE(tok->is_eog(50256));
  EXPECT_EQ(tok->token_to_piece(50256), "");
  EXPECT_EQ(tok->token_to_piece(198), "\n");
  EXPECT_EQ(tok->encode("Hello<|endoftext|>", false, true), (std::vector<int32_t>{15496, 50256}));
  const std::vector<int32_t> literal = tok->encode("Hello<|endoftext|>", false, false);
  EXPECT_GT(literal.size(), 2u);
  EXPECT_EQ(tok->decode(literal), "Hello<|endoftext|>");
  // Malformed UTF-8 is replaced by U+FFFD before the regexes, as llama.cpp does.
  const std::string malformed = {'a', '\xFF', 'b'};
  EXPECT_EQ(tok->decode(tok->encode(malformed, false, false)), "a\uFFFDb");
}

// ~100 KB of mixed text (all test cases, repeated) must tokenize well under a second.
void check_speed(const std::string& vocab_path) {
  const auto file = gguf::GgufFile::open(vocab_path);
  const auto tokenizer = Tokenizer::from_gguf(*file);
  std::string text;
  const std::vector<Case> cases = load_cases(vocab_path);
  while (text.size() < 100 * 1024) {
    for (const Case& c : cases) text += c.text + "\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer->encode(text, true, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu bytes -> %zu tokens in %.1f ms\n", vocab_path.c_str(), text.size(),
              ids.size(), seconds * 1e3);
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(tokenizer->decode(std::span(ids).subspan(1)), text);
}

TEST(TokenizerGolden, SpeedLlamaSentencePiece) {
  HEARTH_REQUIRE_SHARED(shared);
  check_speed(shared + "/tokenizer/ggml-vocab-llama-spm.gguf");
}

TEST(TokenizerGolden, SpeedGpt2ByteLevelBpe) {
  HEARTH_REQUIRE_SHARED(shared);
  check_speed(shared + "/tokenizer/ggml-vocab-gpt-2.gguf");
}

}  // namespace
}  // namespace hearth::text
