// The pre-tokenizer families beyond the ones llama.cpp's shared vectors cover. Each case shows the
// rule that sets its family apart (digit grouping, contractions, case splits, CJK runs, whitespace
// runs, sentence marks). The expected pieces were worked out from each family's regexes as
// llama.cpp runs them and cross-checked with Python's `regex` module on the same patterns.
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace hearth::text {
namespace {

using Pieces = std::vector<std::string>;

Pieces family_split(const std::string& name, const std::string& text) {
  std::vector<std::string_view> pieces;
  PreTokenizer::create(name)->split(text, pieces);
  Pieces out;
  for (const std::string_view p : pieces) {
    if (!p.empty()) out.emplace_back(p);
  }
  return out;
}

struct FamilyCase {
  const char* name;
  const char* text;
  Pieces expected;
};

TEST(PreTokenizerFamilies, DistinguishingRules) {
  const FamilyCase cases[] = {
      // llama.cpp's own "default": punctuation runs first, digits in threes from the left.
      {"default", "a+b=3456 x", {"a", "+", "b", "=", "345", "6", " x"}},
      // Falcon: like default, but contractions lose their apostrophe to the punctuation pass.
      {"falcon", "x=1234567; it's", {"x", "=", "123", "456", "7", ";", " it", "'", "s"}},
      // StarCoder family: every digit alone, GPT-2 otherwise.
      {"starcoder", "abc 2024 it's", {"abc", " ", "2", "0", "2", "4", " it", "'s"}},
      {"llama3", "I'M ok.\n\n12345", {"I", "'M", " ok", ".\n\n", "123", "45"}},
      {"qwen2", "Hi 2024!\n", {"Hi", " ", "2", "0", "2", "4", "!\n"}},
      // Jais 2: a whitespace run cut into power-of-two lengths, the last space kept with the word.
      {"jais-2", "a        b", {"a", "    ", "  ", " ", " b"}},
      // Qwen 3.5: a combining acute accent stays inside the word.
      {"qwen35", "Cafe\u0301 ok", {"Cafe\u0301", " ok"}},
      {"deepseek-coder",
       "def f(x):\n  return 12 \u4F60\u597D",
       {"def", " f", "(", "x", "):", "\n", " ", " return", " ", "1", "2", " ", "\u4F60\u597D"}},
      // DeepSeek V3: digits in threes, a run of kanji and katakana, '.' leading an ASCII word.
      {"deepseek-v3",
       "1234567 \u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 .hello",
       {"123", "456", "7", " ", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " .", "hello"}},
      {"spark2_5", "12345 .ab\nx", {"1", "2", "3", "4", "5", " .", "ab", "\n", "x"}},
      // BLOOM: cut at whitespace and sentence marks, the CJK full stop among them.
      {"bloom",
       "Hello, world! \u4F60\u597D\u3002ok",
       {"Hello", ",", " world", "!", " \u4F60\u597D", "\u3002", "ok"}},
      {"viking", "abc123, x", {"abc", "1", "2", "3", ",", " x"}},
      // Tekken: case changes split words, each digit alone, a word may take one leading '/'.
      {"tekken",
       "HelloWorld camelCase 2024 a/b",
       {"Hello", "World", " camel", "Case", " ", "2", "0", "2", "4", " a", "/b"}},
      {"chameleon",
       "<sentinel:12>IMGIMGABZ  x 3.14",
       {"<", "sentinel", ":", "1", "2", ">", "IMGIMGABZ", "  ", "x", " ", "3", ".", "1", "4"}},
      // GPT-4o: an upper-case run keeps the lower-case tail, the contraction attaches.
      {"gpt-4o",
       "HelloWorld's 12345 JSONParser",
       {"Hello", "World's", " ", "123", "45", " JSONParser"}},
      {"granite-embed-multi-97m", "Cafe\u0301Bar 12345", {"Cafe\u0301", "Bar", " ", "123", "45"}},
      // SuperBPE: digit groups of three counted from the right.
      {"superbpe", "1234567 abc", {"1", "234", "567", " abc"}},
      {"bailingmoe", "it's 123\n\nok", {"it", "'s", " ", "1", "2", "3", "\n\n", "ok"}},
      // Seed-Coder: punctuation never takes the newlines after it.
      {"seed-coder", "a!!\n\nb 42", {"a", "!!", "\n\n", "b", " ", "4", "2"}},
      // Ufakzeka: no contractions, so a Turkish suffix after ' stays one piece.
      {"ufakzeka", "Ankara'da 12", {"Ankara", "'da", " ", "1", "2"}},
      {"laguna", "ab\n\ncd 12", {"ab", "\n\n", "cd", " ", "1", "2"}},
      // EXAONE MoE: words joined by single spaces form one piece.
      {"exaone-moe", "New York City 12", {"New York City", " ", "1", "2"}},
      {"minicpm5", "1234567 ok", {"123", "456", "7", " ok"}},
      // Ideographic space is whitespace; a letter run may take one such leading character.
      {"gpt-2", "I'M  x\u3000y", {"I", "'", "M", " ", " x", "\u3000", "y"}},
      {"qwen2", "a\u3000\u3000b", {"a", "\u3000", "\u3000b"}},
  };
  for (const FamilyCase& c : cases) {
    EXPECT_EQ(family_split(c.name, c.text), c.expected) << c.name << ": '" << c.text << "'";
  }
}

// Whitespace is what llama.cpp counts as whitespace (Unicode White_Space): U+180E MONGOLIAN VOWEL
// SEPARATOR, which PCRE2's own \s takes, is a non-letter here, so two of them form one run.
TEST(PreTokenizerFamilies, WhitespaceIsLlamaCppWhitespace) {
  EXPECT_EQ(family_split("gpt-2", "a\u180E\u180Eb"), (Pieces{"a", "\u180E\u180E", "b"}));
  EXPECT_EQ(family_split("gpt-2", "a\u0085 b"), (Pieces{"a", "\u0085", " b"}));
  // llama.cpp hides non-ASCII whitespace from DeepSeek LLM's punctuation class, whose range
  // U+3000..U+3002 would otherwise take the ideographic space.
  EXPECT_EQ(family_split("deepseek-llm", "\u3002\u3000"), (Pieces{"\u3002", "\u3000"}));
}

// Every accepted name (all of llama.cpp's byte-level BPE names but the few docs/tokenizers.md
// lists as unsupported) builds, and its pieces cover any text exactly, in order.
TEST(PreTokenizerFamilies, EveryNameCoversTheText) {
  const std::string text =
      "Hello WORLD, it's 2024-12-31!\n\n\tcaf\u00E9 \u4F60\u597D\u3002 "
      "\u0645\u0631\u062D\u0628\u0627"
      "  x\u3000y 1234567 <sentinel:3> IMGIMGABZ a/b \U0001F30D\r\n";
  const std::string names = PreTokenizer::known_names();
  size_t count = 0;
  for (const std::string& name : test::split(names, ", ")) {
    SCOPED_TRACE(name);
    std::vector<std::string_view> pieces;
    PreTokenizer::create(name)->split(text, pieces);
    std::string joined;
    for (const std::string_view p : pieces) joined += p;
    EXPECT_EQ(joined, text);
    ++count;
  }
  EXPECT_EQ(count, 78u);  // the names docs/tokenizers.md lists
}

TEST(PreTokenizerFamilies, UnknownNameIsAClearError) {
  try {
    PreTokenizer::create("kimi-k2");
    ADD_FAILURE() << "kimi-k2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'kimi-k2' is not a supported pre-tokenizer"),
              std::string::npos)
        << e.what();
  }
}

// llama.cpp turns BOS on for some names when the file does not say; the file's key wins.
TEST(PreTokenizerFamilies, AddBosDefaultsByName) {
  const auto data = [](const std::string& pre, std::optional<bool> add_bos) {
    TokenizerData d;
    d.model = "gpt2";
    d.pre = pre;
    for (int b = 0; b < 256; ++b) d.tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
    d.bos_id = 0;
    d.add_bos = add_bos;
    return d;
  };
  EXPECT_TRUE(Tokenizer(data("llama3", std::nullopt)).add_bos_default());
  EXPECT_TRUE(Tokenizer(data("tekken", std::nullopt)).add_bos_default());
  EXPECT_TRUE(Tokenizer(data("chameleon", std::nullopt)).add_bos_default());
  EXPECT_FALSE(Tokenizer(data("qwen2", std::nullopt)).add_bos_default());
  EXPECT_FALSE(Tokenizer(data("llama3", false)).add_bos_default());
  EXPECT_TRUE(Tokenizer(data("qwen2", true)).add_bos_default());
}

}  // namespace
}  // namespace hearth::text
