// Jinja source -> a flat list of text runs and tag token lists, with the whitespace rules Hugging
// Face renders chat templates with already applied: trim_blocks (a block or comment tag eats the
// one newline after it), lstrip_blocks (spaces and tabs before a block or comment tag on its own
// line go), and the explicit `-` (all whitespace on that side goes) and `+` (lstrip off) markers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::text::jinja {

struct Token {
  enum class Type { Name, String, Int, Float, Op, End };
  Type type = Type::End;
  std::string text;  // name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
};

struct Piece {
  enum class Type { Text, Output, Statement };  // text, {{ ... }}, {% ... %}
  Type type = Type::Text;
  std::string text;           // Text only
  std::vector<Token> tokens;  // the tag's tokens, ending with an End token
  int line = 1;               // where the piece starts, for error messages
};

// Error (hearth::Error, with the line) on an unclosed tag, comment or string, or a character that
// starts no token.
std::vector<Piece> lex(std::string_view source);

}  // namespace hearth::text::jinja
