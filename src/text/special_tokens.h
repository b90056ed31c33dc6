// Cutting text at the texts of special tokens before it reaches the SentencePiece/BPE encoders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace hearth::text {

// A piece of the input: either a special token found verbatim in it, or raw text to encode.
struct Fragment {
  int32_t token = -1;  // >= 0: this special token; -1: `text` is raw text
  std::string_view text;
};

// Follows llama.cpp: user-defined tokens are always matched; control and unknown tokens only when
// special parsing is on. Longer tokens are cut out first over the whole text, then shorter ones in
// what is left, so a special token never matches inside a longer one.
class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Raw fragments are views into `text` and never empty. Within the byte ranges `literal`
  // ([first, second), ascending, disjoint) only user-defined tokens are matched, as without
  // parse_special: a control token there, or one that overlaps such a range, stays text.
  std::vector<Fragment> split(std::string_view text, bool parse_special,
                              std::span<const std::pair<size_t, size_t>> literal = {}) const;

 private:
  const Vocab& vocab_;
  std::vector<bool> user_defined_id_;  // by id
  std::vector<int32_t> user_defined_;  // longest text first
  std::vector<int32_t> all_special_;   // user-defined, control and unknown; longest text first
};

}  // namespace hearth::text
