// Self-contained tokenizer tests over tiny in-memory vocabularies: SentencePiece merging, byte
// fallback, special tokens, BPE merges, pre-tokenizer regexes, and rejection of bad metadata.
#include <cmath>
#include <cstdio>
#include <functional>

#include "common/test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace hearth::text {
namespace {

// Expectations write SentencePiece's U+2581 as '_' and GPT-2's space (U+0120) as '~'.
std::string from_readable(std::string s, bool spm) {
  std::string out;
  for (const char c : s) {
    if (spm && c == '_') {
      out.append(kSpmSpace);
    } else if (!spm && c == '~') {
      out.append(byte_to_unicode(' '));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The inverse of from_readable, for comparing token texts.
std::string to_readable(std::string_view text, bool spm) {
  const std::string_view space = spm ? kSpmSpace : byte_to_unicode(' ');
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, space.size()) == space) {
      out.push_back(spm ? '_' : '~');
      pos += space.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

std::vector<std::string> texts(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (const int32_t id : ids)
    out.push_back(to_readable(tok.token_text(id), tok.model() == "llama"));
  return out;
}

using Texts = std::vector<std::string>;

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void add_token(TokenizerData& d, const std::string& text, float score, TokenType type) {
  d.tokens.push_back(text);
  d.scores.push_back(score);
  d.types.push_back(type);
}

// <unk> <s> </s>, optionally the 256 <0xXX> byte tokens, then `pieces` ('_' for U+2581).
TokenizerData spm_data(const std::vector<std::pair<std::string, float>>& pieces,
                       bool byte_tokens = true) {
  TokenizerData d;
  d.source = "tiny-spm";
  d.model = "llama";
  add_token(d, "<unk>", 0, TokenType::Unknown);
  add_token(d, "<s>", 0, TokenType::Control);
  add_token(d, "</s>", 0, TokenType::Control);
  if (byte_tokens) {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      add_token(d, hex, 0, TokenType::Byte);
    }
  }
  for (const auto& [text, score] : pieces)
    add_token(d, from_readable(text, true), score, TokenType::Normal);
  d.unk_id = 0;
  d.bos_id = 1;
  d.eos_id = 2;
  return d;
}

// The 256 byte-level characters in byte order, then `extra` tokens ('~' for the mapped space).
TokenizerData bpe_data(const std::vector<std::string>& merges,
                       const std::vector<std::string>& extra, const std::string& pre = "gpt-2") {
  TokenizerData d;
  d.source = "tiny-bpe";
  d.model = "gpt2";
  d.pre = pre;
  for (int b = 0; b < 256; ++b) d.tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
  for (const std::string& t : extra) d.tokens.push_back(from_readable(t, false));
  for (const std::string& m : merges) d.merges.push_back(from_readable(m, false));
  return d;
}

// --- SentencePiece ---

TEST(TokenizerSpm, MergesHighestScoreFirst) {
  // "bc" outscores "ab" and "_a", so it merges first and "abc" follows from it.
  // clang-format off
  Tokenizer tok(spm_data({{"_", -1}, {"a", -2}, {"b", -3}, {"c", -4}, {"ab", -5},
                          {"bc", -1.5f}, {"_a", -6}, {"abc", -0.5f}}));
  // clang-format on
  EXPECT_EQ(texts(tok, tok.encode("abc", false, false)), (Texts{"_", "abc"}));

  // Now "_a" is best: once taken, "abc" can no longer form.
  // clang-format off
  Tokenizer tok2(spm_data({{"_", -1}, {"a", -2}, {"b", -3}, {"c", -4}, {"ab", -5},
                           {"bc", -1.5f}, {"_a", -0.1f}, {"abc", -0.5f}}));
  // clang-format on
  EXPECT_EQ(texts(tok2, tok2.encode("abc", false, false)), (Texts{"_a", "bc"}));
}

TEST(TokenizerSpm, EqualScoresMergeLeftmostFirst) {
  Tokenizer tok(spm_data({{"_", -1}, {"a", -1}, {"aa", -1}}));
  EXPECT_EQ(texts(tok, tok.encode("aaa", false, false)), (Texts{"_", "aa", "a"}));
}

TEST(TokenizerSpm, DummyPrefixAndSpaces) {
  Tokenizer tok(spm_data({{"_", -1}, {"a", -2}, {"_a", -1}}));
  EXPECT_EQ(texts(tok, tok.encode("a", false, false)), (Texts{"_a"}));
  EXPECT_EQ(texts(tok, tok.encode(" a", false, false)), (Texts{"_", "_a"}));
  EXPECT_EQ(texts(tok, tok.encode("a a", false, false)), (Texts{"_a", "_a"}));
  EXPECT_TRUE(tok.encode("", false, false).empty());
  EXPECT_EQ(tok.encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok.encode("a", true, false).front(), 1);

  TokenizerData d = spm_data({{"_", -1}, {"a", -2}, {"_a", -1}});
  d.add_space_prefix = false;
  Tokenizer no_prefix(std::move(d));
  EXPECT_EQ(texts(no_prefix, no_prefix.encode("a", false, false)), (Texts{"a"}));
  EXPECT_EQ(no_prefix.decode(no_prefix.encode(" a", false, false)), " a");
}

TEST(TokenizerSpm, ByteFallback) {
  Tokenizer tok(spm_data({{"_", -1}, {"a", -2}}));
  EXPECT_EQ(texts(tok, tok.encode("\xC3\xA9", false, false)), (Texts{"_", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(tok.decode(tok.encode("a\xC3\xA9\xFF", false, false)), "a\xC3\xA9\xFF");

  // Without byte tokens, unknown bytes become <unk>, which prints as U+2585.
  Tokenizer no_bytes(spm_data({{"_", -1}, {"a", -2}}, false));
  EXPECT_EQ(texts(no_bytes, no_bytes.encode("\xC3\xA9", false, false)),
            (Texts{"_", "<unk>", "<unk>"}));
  EXPECT_EQ(no_bytes.token_to_piece(0), "\xE2\x96\x85");
}

TEST(TokenizerSpm, SpecialTokens) {
  TokenizerData d = spm_data({{"_", -1}, {"a", -2}, {"b", -2}, {"_a", -1}, {"!", -3}});
  add_token(d, "<x>", 0, TokenType::UserDefined);
  add_token(d, "<x>!", 0, TokenType::Control);
  Tokenizer tok(std::move(d));

  // Control tokens only when parsing specials; the text after a special token gets a dummy prefix.
  EXPECT_EQ(texts(tok, tok.encode("a</s>b", false, true)), (Texts{"_a", "</s>", "_", "b"}));
  const std::vector<int32_t> literal = tok.encode("a</s>b", false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 2), 0);
  EXPECT_EQ(tok.decode(literal), "a</s>b");

  // User-defined tokens always; the longer control token wins when specials are parsed.
  EXPECT_EQ(texts(tok, tok.encode("a<x>!", false, false)), (Texts{"_a", "<x>", "_", "!"}));
  EXPECT_EQ(texts(tok, tok.encode("a<x>!", false, true)), (Texts{"_a", "<x>!"}));
  EXPECT_EQ(texts(tok, tok.encode("<s>a", true, true)), (Texts{"<s>", "<s>", "_a"}));
}

TEST(TokenizerSpm, LiteralRangesKeepControlTokensAsText) {
  TokenizerData d = spm_data({{"_", -1}, {"a", -2}, {"b", -2}, {"_a", -1}, {"!", -3}});
  add_token(d, "<x>", 0, TokenType::UserDefined);
  Tokenizer tok(std::move(d));
  // "</s>a</s>b</s>": the middle one lies in a literal range (a chat message's content), the
  // others are markup.
  const std::string text = "</s>a</s>b</s>";
  const std::vector<std::pair<size_t, size_t>> content = {{4, 10}};
  const std::vector<int32_t> ids = tok.encode(text, false, true, content);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2);
  EXPECT_EQ(ids.front(), 2);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(tok.decode(ids), " a</s>b");  // control tokens decode to nothing, the text to itself
  // A control token that only overlaps the range stays text too; user-defined tokens are
  // matched everywhere, as without special parsing.
  const std::vector<int32_t> overlap = tok.encode("a</s>", false, true, {{{0, 3}}});
  EXPECT_EQ(std::count(overlap.begin(), overlap.end(), 2), 0);
  const std::vector<int32_t> user = tok.encode("a<x>b", false, true, {{{0, 5}}});
  EXPECT_EQ(texts(tok, user), (Texts{"_a", "<x>", "_", "b"}));
  // Without ranges, the same as plain special parsing.
  EXPECT_EQ(tok.encode(text, false, true, {}), tok.encode(text, false, true));
}

TEST(TokenizerSpm, PiecesAndDecode) {
  Tokenizer tok(spm_data({{"_", -1}, {"a", -2}, {"b", -3}, {"_ab", -1}, {"ab", -1}}));
  EXPECT_EQ(tok.token_to_piece(1), "");         // <s>
  EXPECT_EQ(tok.token_to_piece(3 + 'A'), "A");  // <0x41>
  EXPECT_EQ(tok.token_to_piece(tok.encode("ab", false, false)[0]), " ab");
  // The first token's dummy-prefix space goes; a leading BOS keeps it, as in llama.cpp.
  EXPECT_EQ(tok.decode(tok.encode("ab ab", false, false)), "ab ab");
  EXPECT_EQ(tok.decode(tok.encode("ab ab", true, false)), " ab ab");
  EXPECT_EQ(tok.decode(tok.encode("  ab", false, false)), "  ab");
  EXPECT_TRUE(tok.is_control(1));
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
  EXPECT_FALSE(tok.is_eog(-1));
  EXPECT_TRUE(tok.add_bos_default());
  EXPECT_FALSE(tok.add_eos_default());
  expect_error([&] { tok.token_to_piece(tok.n_vocab()); }, "out of range");
  const std::vector<int32_t> bad = {4, -1};
  expect_error([&] { tok.decode(bad); }, "token id -1");
}

// --- byte-level BPE ---

TEST(TokenizerBpe, MergesLowestRankFirst) {
  Tokenizer ab_first(bpe_data({"a b", "b c"}, {"ab", "bc"}));
  EXPECT_EQ(texts(ab_first, ab_first.encode("abc", false, false)), (Texts{"ab", "c"}));
  Tokenizer bc_first(bpe_data({"b c", "a b"}, {"ab", "bc"}));
  EXPECT_EQ(texts(bc_first, bc_first.encode("abc", false, false)), (Texts{"a", "bc"}));
}

TEST(TokenizerBpe, WordsAndDecode) {
  Tokenizer tok(bpe_data({"h e", "l l", "he ll", "hell o", "~ w", "o r", "~w or", "l d", "~wor ld"},
                         {"he", "ll", "hell", "hello", "~w", "or", "~wor", "ld", "~world"}));
  EXPECT_EQ(texts(tok, tok.encode("hello world", false, false)), (Texts{"hello", "~world"}));
  // Merges never cross the pre-tokenizer's word boundaries.
  EXPECT_EQ(texts(tok, tok.encode("hello,world", false, false)),
            (Texts{"hello", ",", "w", "or", "ld"}));
  EXPECT_EQ(tok.token_to_piece(' '), " ");  // token 0x20 is U+0120, GPT-2's stand-in for a space
  EXPECT_EQ(tok.token_to_piece('!'), "!");
  EXPECT_EQ(tok.token_to_piece(tok.encode(" ", false, false)[0]), " ");
  EXPECT_EQ(tok.token_to_piece(tok.encode("\n", false, false)[0]), "\n");
  const std::string text = "hello  world\n\t\xC3\xA9\xE2\x82\xAC 123";
  EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text);
  EXPECT_FALSE(tok.add_bos_default());
  EXPECT_FALSE(tok.add_space_prefix());
}

TEST(TokenizerBpe, SpecialTokensByText) {
  TokenizerData d = bpe_data({}, {"<|endoftext|>", "<tool>"});
  d.types.assign(d.tokens.size(), TokenType::Normal);  // "<|endoftext|>" is forced to control
  d.types[257] = TokenType::UserDefined;
  Tokenizer tok(std::move(d));
  const int32_t eot = 256;
  EXPECT_TRUE(tok.is_control(eot));
  EXPECT_TRUE(tok.is_eog(eot));
  EXPECT_EQ(tok.eot(), eot);
  EXPECT_EQ(tok.eos(), -1);
  EXPECT_EQ(tok.encode("hi<|endoftext|>", false, true).back(), eot);
  EXPECT_EQ(tok.encode("hi<|endoftext|>", false, false).size(), 2u + 13u);
  EXPECT_EQ(tok.encode("a<tool>b", false, false), (std::vector<int32_t>{'a', 257, 'b'}));
  EXPECT_EQ(tok.token_to_piece(257), "<tool>");
  EXPECT_EQ(tok.token_to_piece(eot), "");
  EXPECT_EQ(tok.encode("x", true, false).size(), 1u);  // no BOS in this vocabulary
}

TEST(TokenizerBpe, Llama3IgnoresMergesForWholeTokens) {
  Tokenizer gpt2(bpe_data({"a b"}, {"ab", "abc"}, "gpt-2"));
  EXPECT_EQ(texts(gpt2, gpt2.encode("abc", false, false)), (Texts{"ab", "c"}));
  Tokenizer llama3(bpe_data({"a b"}, {"ab", "abc"}, "llama-bpe"));
  EXPECT_EQ(texts(llama3, llama3.encode("abc", false, false)), (Texts{"abc"}));
}

// --- pre-tokenizer ---

std::vector<std::string> pre_split(const std::string& name, const std::string& text) {
  std::vector<std::string_view> pieces;
  PreTokenizer::create(name)->split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(pre_split("gpt-2", "Hello world's  test\n"),
            (Texts{"Hello", " world", "'s", " ", " test", "\n"}));
  EXPECT_EQ(pre_split("gpt-2", "12345 x3!! \t"), (Texts{"12345", " x", "3", "!!", " \t"}));
  EXPECT_EQ(pre_split("default", "I'M"), (Texts{"I", "'", "M"}));
  EXPECT_TRUE(pre_split("gpt-2", "").empty());
}

TEST(PreTokenizer, Llama3AndQwen2) {
  EXPECT_EQ(pre_split("llama3", "12345 abc"), (Texts{"123", "45", " abc"}));
  EXPECT_EQ(pre_split("llama3", "I'M ok.\n\nHi"), (Texts{"I", "'M", " ok", ".\n\n", "Hi"}));
  EXPECT_EQ(pre_split("llama3", "a\n\n b"), (Texts{"a", "\n\n", " b"}));
  EXPECT_EQ(pre_split("qwen2", "12345 abc"), (Texts{"1", "2", "3", "4", "5", " abc"}));
  expect_error([] { PreTokenizer::create("nonsense"); }, "known: default, gpt-2");
}

// --- bad metadata ---

TEST(TokenizerBadData, Rejected) {
  const auto build = [](const std::function<void(TokenizerData&)>& edit) {
    return [edit] {
      TokenizerData d = spm_data({{"_", -1}, {"a", -2}});
      edit(d);
      Tokenizer tok(std::move(d));
    };
  };
  expect_error(build([](TokenizerData& d) { d.model = std::string_view("bert"); }),
               "tiny-spm: tokenizer.ggml.model 'bert'");
  expect_error(build([](TokenizerData& d) { d.tokens.clear(); }), "tokenizer.ggml.tokens is empty");
  expect_error(build([](TokenizerData& d) { d.scores.pop_back(); }), "tokenizer.ggml.scores has");
  expect_error(build([](TokenizerData& d) { d.types.push_back(TokenType::Normal); }),
               "tokenizer.ggml.token_type has");
  expect_error(build([](TokenizerData& d) { d.types[5] = static_cast<TokenType>(9); }),
               "tokenizer.ggml.token_type[5] is 9");
  expect_error(build([](TokenizerData& d) { d.scores[4] = std::nanf(""); }), "scores[4] is NaN");
  expect_error(build([](TokenizerData& d) { d.tokens[259] = std::string_view("a"); }),
               "tokens[260] 'a' repeats token 259");
  expect_error(build([](TokenizerData& d) { d.bos_id = 100000; }),
               "tokenizer.ggml.bos_token_id 100000");
  expect_error(build([](TokenizerData& d) { d.eos_id = -2; }), "tokenizer.ggml.eos_token_id");
  expect_error(build([](TokenizerData& d) { d.tokens[3] = std::string_view("<0xZZ>"); }),
               "has type byte");

  const auto build_bpe = [](std::vector<std::string> merges, std::string pre) {
    return [=] { Tokenizer tok(bpe_data(merges, {"ab"}, pre)); };
  };
  expect_error(build_bpe({"a b", "ab"}, "gpt-2"), "tiny-bpe: tokenizer.ggml.merges[1] 'ab'");
  expect_error(build_bpe({"a "}, "gpt-2"), "tokenizer.ggml.merges[0]");
  expect_error(build_bpe({"a b"}, "nonsense"), "tiny-bpe: tokenizer.ggml.pre 'nonsense'");
}

// --- from_gguf ---

// A tiny SentencePiece vocabulary written as GGUF; `edit` changes the writer before writing.
std::string write_vocab(const std::string& name,
                        const std::function<void(gguf::GgufWriter&)>& edit) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  const TokenizerData d = spm_data({{"_", -1}, {"a", -2}, {"_a", -1}});
  w.set_string_array("tokenizer.ggml.tokens", d.tokens);
  w.set_f32_array("tokenizer.ggml.scores", d.scores);
  std::vector<int32_t> types;
  for (const TokenType t : d.types) types.push_back(static_cast<int32_t>(t));
  w.set_i32_array("tokenizer.ggml.token_type", types);
  edit(w);
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

std::unique_ptr<Tokenizer> load(const std::string& path) {
  return Tokenizer::from_gguf(*gguf::GgufFile::open(path));
}

TEST(TokenizerGguf, ReadsKeysAndDefaults) {
  const auto tok = load(write_vocab("ok", [](gguf::GgufWriter&) {}));
  EXPECT_EQ(tok->model(), "llama");
  EXPECT_EQ(tok->bos(), 1);  // llama.cpp's SentencePiece defaults
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  EXPECT_TRUE(tok->add_bos_default());
  EXPECT_EQ(texts(*tok, tok->encode("a a", false, false)), (Texts{"_a", "_a"}));

  const auto custom = load(write_vocab("custom", [](gguf::GgufWriter& w) {
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
  }));
  EXPECT_EQ(custom->eos(), 1);
  EXPECT_TRUE(custom->is_eog(1));
  EXPECT_FALSE(custom->add_bos_default());
  EXPECT_EQ(texts(*custom, custom->encode("a", false, false)), (Texts{"a"}));
}

TEST(TokenizerGguf, BadFilesNameFileAndKey) {
  const auto expect_load_error = [](const std::string& name,
                                    const std::function<void(gguf::GgufWriter&)>& edit,
                                    const std::string& needle) {
    const std::string path = write_vocab(name, edit);
    expect_error([&] { load(path); }, needle);
    expect_error([&] { load(path); }, name + ".gguf");
  };
  // Overwriting a key is done by setting it again; the writer keeps the last value.
  expect_load_error(
      "no_model", [](gguf::GgufWriter& w) { w.set_string("tokenizer.ggml.model", ""); },
      "tokenizer.ggml.model ''");
  expect_load_error(
      "wrong_type",
      [](gguf::GgufWriter& w) {
        const float f[] = {1.0f};
        w.set_f32_array("tokenizer.ggml.tokens", f);
      },
      "tokenizer.ggml.tokens");
  expect_load_error(
      "bad_bos", [](gguf::GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 5000); },
      "tokenizer.ggml.bos_token_id 5000");
  expect_load_error(
      "bad_type",
      [](gguf::GgufWriter& w) {
        std::vector<int32_t> types(262, 1);
        types[7] = 42;
        w.set_i32_array("tokenizer.ggml.token_type", types);
      },
      "tokenizer.ggml.token_type[7] is 42");
  expect_load_error(
      "no_merges", [](gguf::GgufWriter& w) { w.set_string("tokenizer.ggml.model", "gpt2"); },
      "tokenizer.ggml.merges is missing");

  gguf::GgufWriter bare;
  bare.set_string("general.architecture", "llama");
  const std::string path = test::temp_dir() + "/bare.gguf";
  bare.write(path);
  expect_error([&] { load(path); }, "tokenizer.ggml.model is missing");
  expect_error([&] { load(path); }, "bare.gguf");
}

}  // namespace
}  // namespace hearth::text
