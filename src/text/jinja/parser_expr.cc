// Expressions, by Jinja's precedence from loosest: conditional, or, and, not, comparisons (and
// `in`, `not in`), + and -, ~, * / // %, **, unary - and +, then postfix (attribute, subscript,
// call), filters and `is` tests.
#include "core/error.h"
#include "text/jinja/parser.h"

namespace hearth::text::jinja {

const Token& TokenCursor::peek(size_t ahead) const {
  const size_t i = pos_ + ahead;
  return i < tokens_.size() ? tokens_[i] : tokens_.back();
}

const Token& TokenCursor::next() {
  const Token& t = peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  return t;
}

bool TokenCursor::is_op(std::string_view op, size_t ahead) const {
  const Token& t = peek(ahead);
  return t.type == Token::Type::Op && t.text == op;
}

bool TokenCursor::is_name(std::string_view name, size_t ahead) const {
  const Token& t = peek(ahead);
  return t.type == Token::Type::Name && t.text == name;
}

bool TokenCursor::eat_op(std::string_view op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool TokenCursor::eat_name(std::string_view name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

void TokenCursor::enter() {
  if (++depth_ > kMaxNesting) error("expression nested too deeply");
}

void TokenCursor::expect_op(std::string_view op) {
  if (!eat_op(op)) error(str_cat("expected '", op, "'"));
}

std::string TokenCursor::expect_identifier() {
  if (peek().type != Token::Type::Name) error("expected a name");
  return next().text;
}

void TokenCursor::error(std::string_view what) const {
  const Token& t = peek();
  const std::string near = t.type == Token::Type::End ? "the end of the tag" : "'" + t.text + "'";
  fail("chat template line ", line_, ": ", what, " near ", near);
}

namespace {

ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->name = std::move(name);
  e->line = line;
  return e;
}

ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
  ExprPtr e = make(Expr::Kind::Binary, line, std::move(op));
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return e;
}

ExprPtr parse_unary(TokenCursor& c, bool with_filter);

// Positional and keyword arguments up to the closing parenthesis (already past the opening one).
void parse_call_args(TokenCursor& c, Expr& call) {
  bool first = true;
  while (!c.eat_op(")")) {
    if (!first) {
      c.expect_op(",");
      if (c.eat_op(")")) break;
    }
    first = false;
    if (c.peek().type == Token::Type::Name && c.is_op("=", 1)) {
      std::string key = c.next().text;
      c.next();
      call.kwargs.emplace_back(std::move(key), parse_expression(c));
    } else {
      call.args.push_back(parse_expression(c));
    }
  }
}

ExprPtr parse_primary(TokenCursor& c) {
  const int line = c.line();
  const Token& t = c.next();
  switch (t.type) {
    case Token::Type::String: {
      std::string s = t.text;
      // Adjacent string literals join, as in Python.
      while (c.peek().type == Token::Type::String) s += c.next().text;
      ExprPtr e = make(Expr::Kind::Literal, line);
      e->literal = Value(std::move(s));
      return e;
    }
    case Token::Type::Int:
    case Token::Type::Float: {
      ExprPtr e = make(Expr::Kind::Literal, line);
      e->literal = t.type == Token::Type::Int ? Value(t.int_value) : Value(t.float_value);
      return e;
    }
    case Token::Type::Name: {
      ExprPtr e = make(Expr::Kind::Literal, line);
      if (t.text == "true" || t.text == "True")
        e->literal = Value(true);
      else if (t.text == "false" || t.text == "False")
        e->literal = Value(false);
      else if (t.text == "none" || t.text == "None")
        e->literal = Value::none();
      else
        return make(Expr::Kind::Name, line, t.text);
      return e;
    }
    case Token::Type::Op:
      break;
    case Token::Type::End:
      c.error("expected an expression");
  }
  if (t.text == "(") {
    ExprPtr inner = parse_expression(c);
    if (c.is_op(",")) {  // a tuple: kept as a list
      ExprPtr list = make(Expr::Kind::List, line);
      list->args.push_back(std::move(inner));
      while (c.eat_op(",") && !c.is_op(")")) list->args.push_back(parse_expression(c));
      inner = std::move(list);
    }
    c.expect_op(")");
    return inner;
  }
  if (t.text == "[") {
    ExprPtr list = make(Expr::Kind::List, line);
    while (!c.eat_op("]")) {
      if (!list->args.empty()) {
        c.expect_op(",");
        if (c.eat_op("]")) break;
      }
      list->args.push_back(parse_expression(c));
    }
    return list;
  }
  if (t.text == "{") {
    ExprPtr dict = make(Expr::Kind::Dict, line);
    while (!c.eat_op("}")) {
      if (!dict->args.empty()) {
        c.expect_op(",");
        if (c.eat_op("}")) break;
      }
      dict->args.push_back(parse_expression(c));
      c.expect_op(":");
      dict->args.push_back(parse_expression(c));
    }
    return dict;
  }
  c.error("expected an expression");
}

// After '[': an index or a slice.
ExprPtr parse_subscript(TokenCursor& c, ExprPtr object) {
  const int line = c.line();
  ExprPtr parts[3];
  int colons = 0;
  while (!c.is_op("]")) {
    if (c.eat_op(":")) {
      if (++colons > 2) c.error("too many ':' in a slice");
      continue;
    }
    if (parts[colons]) c.error("expected ':' or ']'");
    parts[colons] = parse_expression(c);
  }
  c.expect_op("]");
  if (colons == 0) {
    if (!parts[0]) c.error("empty subscript");
    ExprPtr e = make(Expr::Kind::Index, line);
    e->args.push_back(std::move(object));
    e->args.push_back(std::move(parts[0]));
    return e;
  }
  ExprPtr e = make(Expr::Kind::Slice, line);
  e->args.push_back(std::move(object));
  for (ExprPtr& p : parts) e->args.push_back(std::move(p));
  return e;
}

ExprPtr parse_postfix(TokenCursor& c, ExprPtr e) {
  while (true) {
    const int line = c.line();
    if (c.eat_op(".")) {
      ExprPtr attr = make(Expr::Kind::Attr, line, c.expect_identifier());
      attr->args.push_back(std::move(e));
      e = std::move(attr);
    } else if (c.eat_op("[")) {
      e = parse_subscript(c, std::move(e));
    } else if (c.eat_op("(")) {
      ExprPtr call = make(Expr::Kind::Call, line);
      call->args.push_back(std::move(e));
      parse_call_args(c, *call);
      e = std::move(call);
    } else {
      return e;
    }
  }
}

// Filters and tests bind tighter than any binary operator: `a + b | trim` trims b only.
ExprPtr parse_filters_and_tests(TokenCursor& c, ExprPtr e) {
  while (true) {
    const int line = c.line();
    if (c.eat_op("|")) {
      ExprPtr f = make(Expr::Kind::Filter, line, c.expect_identifier());
      f->args.push_back(std::move(e));
      if (c.eat_op("(")) parse_call_args(c, *f);
      e = std::move(f);
    } else if (c.eat_name("is")) {
      const bool negated = c.eat_name("not");
      ExprPtr t = make(Expr::Kind::Test, line, c.expect_identifier());
      t->negated = negated;
      t->args.push_back(std::move(e));
      if (c.eat_op("(")) {
        parse_call_args(c, *t);
      } else if (c.peek().type != Token::Type::End && c.peek().type != Token::Type::Op &&
                 !c.is_name("and") && !c.is_name("or") && !c.is_name("else") && !c.is_name("if") &&
                 !c.is_name("in") && !c.is_name("is") && !c.is_name("not")) {
        t->args.push_back(parse_unary(c, false));  // `is equalto 3`, `is sameas none`
      }
      e = std::move(t);
    } else {
      return e;
    }
  }
}

ExprPtr parse_unary(TokenCursor& c, bool with_filter) {
  const int line = c.line();
  c.enter();
  ExprPtr e;
  if (c.is_op("-") || c.is_op("+")) {
    e = make(Expr::Kind::Unary, line, c.next().text);
    e->args.push_back(parse_unary(c, false));
  } else {
    e = parse_postfix(c, parse_primary(c));
  }
  if (with_filter) e = parse_filters_and_tests(c, std::move(e));
  c.leave();
  return e;
}

ExprPtr parse_pow(TokenCursor& c) {
  ExprPtr left = parse_unary(c, true);
  while (c.is_op("**")) {
    const int line = c.line();
    c.next();
    left = binary("**", std::move(left), parse_unary(c, true), line);
  }
  return left;
}

ExprPtr parse_mul(TokenCursor& c) {
  ExprPtr left = parse_pow(c);
  while (c.is_op("*") || c.is_op("/") || c.is_op("//") || c.is_op("%")) {
    const int line = c.line();
    std::string op = c.next().text;
    left = binary(std::move(op), std::move(left), parse_pow(c), line);
  }
  return left;
}

ExprPtr parse_concat(TokenCursor& c) {
  ExprPtr left = parse_mul(c);
  while (c.is_op("~")) {
    const int line = c.line();
    c.next();
    left = binary("~", std::move(left), parse_mul(c), line);
  }
  return left;
}

ExprPtr parse_add(TokenCursor& c) {
  ExprPtr left = parse_concat(c);
  while (c.is_op("+") || c.is_op("-")) {
    const int line = c.line();
    std::string op = c.next().text;
    left = binary(std::move(op), std::move(left), parse_concat(c), line);
  }
  return left;
}

ExprPtr parse_compare(TokenCursor& c) {
  ExprPtr left = parse_add(c);
  while (true) {
    const int line = c.line();
    std::string op;
    static constexpr std::string_view kOps[] = {"==", "!=", "<", ">", "<=", ">="};
    for (const std::string_view o : kOps) {
      if (c.is_op(o)) op = o;
    }
    if (!op.empty()) {
      c.next();
    } else if (c.eat_name("in")) {
      op = "in";
    } else if (c.is_name("not") && c.is_name("in", 1)) {
      c.next();
      c.next();
      op = "not in";
    } else {
      return left;
    }
    left = binary(std::move(op), std::move(left), parse_add(c), line);
  }
}

ExprPtr parse_not(TokenCursor& c) {
  const int line = c.line();
  if (c.eat_name("not")) {
    ExprPtr e = make(Expr::Kind::Unary, line, "not");
    e->args.push_back(parse_not(c));
    return e;
  }
  return parse_compare(c);
}

ExprPtr parse_and(TokenCursor& c) {
  ExprPtr left = parse_not(c);
  while (c.is_name("and")) {
    const int line = c.line();
    c.next();
    left = binary("and", std::move(left), parse_not(c), line);
  }
  return left;
}

}  // namespace

ExprPtr parse_or_expression(TokenCursor& c) {
  ExprPtr left = parse_and(c);
  while (c.is_name("or")) {
    const int line = c.line();
    c.next();
    left = binary("or", std::move(left), parse_and(c), line);
  }
  return left;
}

ExprPtr parse_expression(TokenCursor& c) {
  ExprPtr value = parse_or_expression(c);
  while (c.is_name("if")) {
    const int line = c.line();
    c.next();
    ExprPtr e = make(Expr::Kind::Cond, line);
    e->args.push_back(std::move(value));
    e->args.push_back(parse_or_expression(c));
    e->args.push_back(c.eat_name("else") ? parse_or_expression(c) : nullptr);
    value = std::move(e);
  }
  return value;
}

}  // namespace hearth::text::jinja
