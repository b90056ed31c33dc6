#include "text/special_tokens.h"

#include <algorithm>

namespace hearth::text {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) : vocab_(vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.text[id].empty()) continue;  // would match everywhere
    const TokenType type = vocab.type[id];
    if (type == TokenType::UserDefined) user_defined_.push_back(id);
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

std::vector<Fragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});

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
      for (size_t at; (at = rest.find(special)) != std::string_view::npos;) {
        if (at > 0) next.push_back({-1, rest.substr(0, at)});
        next.push_back({id, special});
        rest.remove_prefix(at + special.size());
        cut = true;
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (cut) fragments.swap(next);
  }
  return fragments;
}

}  // namespace hearth::text
