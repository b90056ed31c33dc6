// SentencePiece-style encoding (llama.cpp's "llama" vocabulary type): greedy merging of adjacent
// symbols by the score of the token they form, with byte fallback for whatever is left unknown.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace hearth::text {

class SpmEncoder {
 public:
  // `unk_id` (or -1) stands in for bytes that have neither a <0xXX> token nor a one-byte token.
  SpmEncoder(const Vocab& vocab, int32_t unk_id);

  // Appends the ids of `text`, which must already be whitespace-escaped (U+2581) and carry its
  // dummy prefix: this does no normalization of its own.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  const Vocab& vocab_;
  std::array<int32_t, 256> byte_ids_{};  // -1: the byte is dropped
};

}  // namespace hearth::text
