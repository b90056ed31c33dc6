#include "text/special_tokens.h"

#include <algorithm>

namespace hearth::text {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) : vocab_(vocab) {
  user_defined_id_.assign(static_cast<size_t>(vocab.size()), false);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.text[id].empty()) continue;  // would match everywhere
    const TokenType type = vocab.type[id];
    if (type == TokenType::UserDefined) {
      user_defined_.push_back(id);
      user_defined_id_[static_cast<size_t>(id)] = true;
    }
    if (type == TokenType::UserDefined || type == TokenType::Control ||
        type == TokenType::Unknown) {
      all_special_.push_back(id);
    }
  }
  // Ties keep id order so that the cut is the same on every run.
  const auto longer = [&](int32_t a, int32_t b) {
    return vocab.text[a].size() > vocab.text[b].size();
  };
  std::stable_sort(user_defined_.begin(), user_defined_.end(), longer);
  std::stable_sort(all_special_.begin(), all_special_.end(), longer);
}

std::vector<Fragment> SpecialTokenSplitter::split(
    std::string_view text, bool parse_special,
    std::span<const std::pair<size_t, size_t>> literal) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});
  // Whether [at, at + n) of text touches a literal range.
  const auto in_literal = [&](size_t at, size_t n) {
    const auto it = std::upper_bound(
        literal.begin(), literal.end(), at,
        [](size_t x, const std::pair<size_t, size_t>& r) { return x < r.second; });
    return it != literal.end() && it->first < at + n;
  };

  std::vector<Fragment> next;
  for (const int32_t id : parse_special ? all_special_ : user_defined_) {
    const std::string_view special = vocab_.text[id];
    next.clear();
    bool cut = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      const bool check = !literal.empty() && !user_defined_id_[static_cast<size_t>(id)];
      for (size_t at, from = 0; (at = rest.find(special, from)) != std::string_view::npos;) {
        if (check && in_literal(static_cast<size_t>(rest.data() - text.data()) + at, special.size())) {
          from = at + 1;  // text there stays text
          continue;
        }
        if (at > 0) next.push_back({-1, rest.substr(0, at)});
        next.push_back({id, special});
        rest.remove_prefix(at + special.size());
        from = 0;
        cut = true;
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (cut) fragments.swap(next);
  }
  return fragments;
}

}  // namespace hearth::text
