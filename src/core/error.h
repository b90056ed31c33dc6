// Errors: every failure the user can cause (bad file, bad flag, bad prompt) is a hearth::Error
// carrying one clear line of text; frontends print it and exit non-zero. Programming errors use
// assertions instead.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hearth {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates its arguments with operator<< (g++ 12 has no <format>).
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// fail(path, ": tensor '", name, "' has ", n, " dims") throws Error with that message.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str_cat(args...));
}

}  // namespace hearth
