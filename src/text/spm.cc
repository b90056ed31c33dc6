#include "text/spm.h"

#include <cstdio>
#include <limits>

#include "core/error.h"
#include "text/pair_merge.h"

namespace hearth::text {

SpmEncoder::SpmEncoder(const Vocab& vocab, int32_t unk_id) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = vocab_.find(hex);
    if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = id >= 0 ? id : unk_id;
  }
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("cannot tokenize a text of ", text.size(), " bytes (at most 2^31 - 1 per piece)");
  }

  std::vector<MergeSymbol> symbols = split_utf8_symbols(text);
  merge_pairs(symbols,
              [&](const MergeSymbol& left, const MergeSymbol& right) -> std::optional<double> {
                const uint32_t size = left.n + right.n;
                if (size > vocab_.max_text_len)
                  return std::nullopt;  // spares hashing runs that cannot be tokens
                const int32_t id = vocab_.find(text.substr(left.start, size));
                if (id < 0) return std::nullopt;
                return vocab_.score[id];
              });

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].n);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token: spell it out as bytes, as SentencePiece's byte fallback does.
    for (const char c : piece) {
      const int32_t byte_id = byte_ids_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace hearth::text
