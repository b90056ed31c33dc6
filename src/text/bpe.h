// Byte-level BPE (llama.cpp's "gpt2" vocabulary type): regex pre-tokenization, bytes mapped to
// printable code points, then merges applied lowest rank first within each word.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pretokenize.h"
#include "text/vocab.h"

namespace hearth::text {

class BpeEncoder {
 public:
  // `merges` are "left right" strings, highest priority first. Error naming the pre-tokenizer or
  // the malformed merge (`source` prefixes messages).
  BpeEncoder(const Vocab& vocab, std::vector<std::string> merges, std::string_view pre,
             const std::string& source);
  BpeEncoder(const BpeEncoder&) = delete;
  BpeEncoder& operator=(const BpeEncoder&) = delete;

  // Appends the ids of raw `text` (any bytes: malformed UTF-8 becomes U+FFFD first, as in
  // llama.cpp, since the regexes work on code points).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  const PreTokenizer& pre_tokenizer() const { return *pre_; }

 private:
  // Rank of the merge "left right", or -1. `key` is scratch space reused between calls.
  int32_t rank(std::string_view left, std::string_view right, std::string& key) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  std::unique_ptr<PreTokenizer> pre_;
  std::vector<std::string> merges_;
  std::unordered_map<std::string_view, int32_t> ranks_;  // views into merges_ -> rank
  size_t max_merge_len_ = 0;
};

}  // namespace hearth::text
