#include "text/pair_merge.h"

#include <algorithm>

#include "text/unicode.h"

namespace hearth::text {

std::vector<MergeSymbol> split_utf8_symbols(std::string_view text) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(utf8_len_lenient(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(n), index - 1,
                       pos + n == text.size() ? -1 : index + 1});
    pos += n;
  }
  return symbols;
}

}  // namespace hearth::text
