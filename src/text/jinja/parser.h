// Tokens -> trees. parse_template is the entry; the cursor and parse_expression are shared between
// the statement parser (parser.cc) and the expression parser (parser_expr.cc).
#pragma once

#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace hearth::text::jinja {

// The whole template; Error (with the line) on a syntax error or an unclosed block.
Body parse_template(std::string_view source);

class TokenCursor {
 public:
  TokenCursor(const std::vector<Token>& tokens, int line) : tokens_(tokens), line_(line) {}

  const Token& peek(size_t ahead = 0) const;
  const Token& next();
  bool at_end() const { return peek().type == Token::Type::End; }
  bool is_op(std::string_view op, size_t ahead = 0) const;
  bool is_name(std::string_view name, size_t ahead = 0) const;
  // Consumes the operator or keyword when it is next.
  bool eat_op(std::string_view op);
  bool eat_name(std::string_view name);
  void expect_op(std::string_view op);
  std::string expect_identifier();
  [[noreturn]] void error(std::string_view what) const;
  int line() const { return line_; }
  // Nesting of parentheses, brackets and unary operators, bounded so that a hostile template
  // cannot exhaust the stack: Error past kMaxNesting.
  void enter();
  void leave() { --depth_; }
  static constexpr int kMaxNesting = 100;

 private:
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int line_;
  int depth_ = 0;
};

// A full expression, the `x if c else y` form included.
ExprPtr parse_expression(TokenCursor& cursor);
// An `or` expression: what a for loop's `if` filter takes (it must not swallow an `else`).
ExprPtr parse_or_expression(TokenCursor& cursor);

}  // namespace hearth::text::jinja
