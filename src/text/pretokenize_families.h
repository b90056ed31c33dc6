// The pre-tokenizer families: each is a sequence of regexes (PCRE2 syntax) plus the vocabulary
// defaults that go with it, and every tokenizer.ggml.pre name maps onto one family. Internal to
// the text layer; PreTokenizer is the interface.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace hearth::text {

struct PreTokenizerFamily {
  // Applied in this order, each within the pieces the previous one left. `\s` and `\S` mean
  // llama.cpp's whitespace (the Unicode White_Space property), not PCRE2's; see pretokenize.cc.
  std::span<const std::string_view> regexes;
  // A word that is itself a token is emitted whole, skipping merges.
  bool ignore_merges = false;
  // BOS is added when the file has no tokenizer.ggml.add_bos_token key.
  bool add_bos = false;
};

// The family of a tokenizer.ggml.pre value; nullptr for an unknown name.
const PreTokenizerFamily* find_pre_tokenizer_family(std::string_view name);

// Every accepted name, comma-separated.
std::string pre_tokenizer_family_names();

}  // namespace hearth::text
