#include "text/stop_strings.h"

#include <algorithm>

namespace hearth::text {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopStringMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  pending_ += piece;
  // The earliest complete stop string wins, so overlapping ones cut at the first.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (std::string_view(pending_).substr(pending_.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace hearth::text
