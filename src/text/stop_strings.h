// Stop strings in streamed text: generation hands over one token's piece at a time, and a stop
// string ("<|im_end|>", "\nUser:") may span several pieces. The matcher holds back only the tail
// that could still become a stop string, so streamed output never shows part of one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth::text {

class StopStringMatcher {
 public:
  // Empty strings are ignored (they would match everywhere).
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Appends a piece and returns the text that is now safe to show. Once a stop string is complete,
  // stopped() is true, the text from the stop string on is dropped, and later pushes return "".
  std::string push(std::string_view piece);

  // The text held back as a possible start of a stop string; call it when generation ends for
  // another reason (end token, length limit), since that text then belongs to the output.
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace hearth::text
