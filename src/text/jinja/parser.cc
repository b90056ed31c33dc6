// Statements: the block structure of {% if %}, {% for %}, {% set %}, {% macro %} and the loop
// controls, built over the lexer's pieces.
#include "text/jinja/parser.h"

#include "core/error.h"

namespace hearth::text::jinja {
namespace {

class StatementParser {
 public:
  explicit StatementParser(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  // Nodes up to one of the `enders` keywords (returned in `ender`, its cursor left after the
  // keyword), or to the end of the template when `enders` is empty.
  Body parse_body(const std::vector<std::string_view>& enders, std::string& ender) {
    // Blocks nest by recursion here and when rendering: bounded, like expressions.
    if (++depth_ > TokenCursor::kMaxNesting) fail("chat template: blocks nested too deeply");
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    Body body;
    while (pos_ < pieces_.size()) {
      const Piece& piece = pieces_[pos_++];
      if (piece.type == Piece::Type::Text) {
        auto n = node(Node::Kind::Text, piece.line);
        n->text = piece.text;
        body.push_back(std::move(n));
        continue;
      }
      // Cursors stay alive until the parse ends: a statement's parser still holds its own while
      // the nested bodies it reads make theirs.
      cursors_.push_back(std::make_unique<TokenCursor>(piece.tokens, piece.line));
      cursor_ = cursors_.back().get();
      TokenCursor& c = *cursor_;
      if (piece.type == Piece::Type::Output) {
        auto n = node(Node::Kind::Output, piece.line);
        n->expr = parse_expression(c);
        expect_end(c);
        body.push_back(std::move(n));
        continue;
      }
      const std::string keyword = c.expect_identifier();
      for (const std::string_view e : enders) {
        if (keyword == e) {
          ender = keyword;
          return body;
        }
      }
      body.push_back(statement(keyword, c, piece.line));
    }
    if (!enders.empty()) {
      fail("chat template: the template ends inside a block (expected {% ", enders.back(), " %})");
    }
    return body;
  }

  static NodePtr node(Node::Kind kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }

  static void expect_end(TokenCursor& c) {
    if (!c.at_end()) c.error("unexpected text in a tag");
  }

  NodePtr statement(const std::string& keyword, TokenCursor& c, int line) {
    if (keyword == "if") return parse_if(c, line);
    if (keyword == "for") return parse_for(c, line);
    if (keyword == "set") return parse_set(c, line);
    if (keyword == "macro") return parse_macro(c, line);
    if (keyword == "break" || keyword == "continue") {
      expect_end(c);
      return node(keyword == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    fail("chat template line ", line, ": unsupported tag '", keyword, "'");
  }

  NodePtr parse_if(TokenCursor& c, int line) {
    auto n = node(Node::Kind::If, line);
    ExprPtr cond = parse_expression(c);
    expect_end(c);
    while (true) {
      std::string ender;
      Body body = parse_body({"elif", "else", "endif"}, ender);
      n->branches.emplace_back(std::move(cond), std::move(body));
      TokenCursor& tail = *cursor_;
      if (ender == "elif") {
        cond = parse_expression(tail);
        expect_end(tail);
        continue;
      }
      expect_end(tail);
      if (ender == "else") {
        n->else_body = parse_body({"endif"}, ender);
        expect_end(*cursor_);
      }
      return n;
    }
  }

  NodePtr parse_for(TokenCursor& c, int line) {
    auto n = node(Node::Kind::For, line);
    do {
      n->names.push_back(c.expect_identifier());
    } while (c.eat_op(","));
    if (!c.eat_name("in")) c.error("expected 'in'");
    n->expr = parse_or_expression(c);
    if (c.eat_name("if")) n->filter = parse_or_expression(c);
    if (c.eat_name("recursive")) c.error("recursive loops are not supported");
    expect_end(c);
    std::string ender;
    n->body = parse_body({"else", "endfor"}, ender);
    expect_end(*cursor_);
    if (ender == "else") {
      n->else_body = parse_body({"endfor"}, ender);
      expect_end(*cursor_);
    }
    return n;
  }

  NodePtr parse_set(TokenCursor& c, int line) {
    auto n = node(Node::Kind::Set, line);
    n->names.push_back(c.expect_identifier());
    if (c.eat_op(".")) {
      n->names.push_back(c.expect_identifier());
      n->set_attribute = true;
    }
    if (c.eat_op("=")) {
      n->expr = parse_expression(c);
      expect_end(c);
      return n;
    }
    // {% set name %}...{% endset %}: the body's output is the value.
    expect_end(c);
    std::string ender;
    n->body = parse_body({"endset"}, ender);
    expect_end(*cursor_);
    return n;
  }

  NodePtr parse_macro(TokenCursor& c, int line) {
    auto n = node(Node::Kind::Macro, line);
    n->text = c.expect_identifier();
    c.expect_op("(");
    while (!c.eat_op(")")) {
      if (!n->names.empty()) c.expect_op(",");
      n->names.push_back(c.expect_identifier());
      n->defaults.push_back(c.eat_op("=") ? parse_expression(c) : nullptr);
    }
    expect_end(c);
    std::string ender;
    n->body = parse_body({"endmacro"}, ender);
    expect_end(*cursor_);
    return n;
  }

  std::vector<Piece> pieces_;
  size_t pos_ = 0;
  std::vector<std::unique_ptr<TokenCursor>> cursors_;
  TokenCursor* cursor_ = nullptr;  // over the tag last read
  int depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return StatementParser(lex(source)).parse_all(); }

}  // namespace hearth::text::jinja
