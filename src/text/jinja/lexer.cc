#include "text/jinja/lexer.h"

#include <cstdlib>

#include "core/error.h"
#include "text/unicode.h"

namespace hearth::text::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

void rstrip_all(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Piece> run() {
    bool strip_next = false;  // the previous tag ended with '-'
    bool trim_next = false;   // the previous tag was a block or comment (trim_blocks)
    while (pos_ < src_.size()) {
      if (strip_next) {
        while (pos_ < src_.size() && is_space(src_[pos_])) advance(1);
      } else if (trim_next && pos_ < src_.size() && src_[pos_] == '\n') {
        advance(1);
      }
      strip_next = trim_next = false;
      const size_t text_start = pos_;
      const int text_line = line_;
      const size_t open = find_open(pos_);
      std::string text(src_.substr(text_start, open - text_start));
      advance(open - text_start);
      if (open == src_.size()) {
        push_text(std::move(text), text_line);
        break;
      }
      const char kind = src_[open + 1];
      advance(2);
      const char marker = pos_ < src_.size() ? src_[pos_] : '\0';
      if (marker == '-') {
        rstrip_all(text);
        advance(1);
      } else if (marker == '+') {
        advance(1);
      } else if (kind != '{') {
        lstrip_line(text, text_start);
      }
      push_text(std::move(text), text_line);
      if (kind == '#') {
        strip_next = comment();
      } else {
        strip_next = tag(kind == '{' ? Piece::Type::Output : Piece::Type::Statement);
      }
      trim_next = kind != '{';
    }
    return std::move(pieces_);
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail("chat template line ", line_, ": ", what);
  }

  void advance(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (src_[pos_ + i] == '\n') ++line_;
    }
    pos_ += n;
  }

  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  // lstrip_blocks: spaces and tabs between the start of the line and the tag go, when nothing else
  // is there. The text's start is a line start when it follows a newline or opens the template.
  void lstrip_line(std::string& text, size_t text_start) const {
    const size_t nl = text.rfind('\n');
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && text_start != 0 && src_[text_start - 1] != '\n') return;
    if (text.find_first_not_of(" \t", from) != std::string::npos) return;
    text.erase(from);
  }

  void push_text(std::string text, int line) {
    if (text.empty()) return;
    Piece p;
    p.type = Piece::Type::Text;
    p.text = std::move(text);
    p.line = line;
    pieces_.push_back(std::move(p));
  }

  // Skips a comment; returns whether it ended with '-'.
  bool comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) error("comment is not closed");
    const bool strip = close > pos_ && src_[close - 1] == '-';
    advance(close + 2 - pos_);
    return strip;
  }

  // Reads a tag's tokens up to its close; returns whether the close had '-'.
  bool tag(Piece::Type type) {
    Piece p;
    p.type = type;
    p.line = line_;
    const std::string_view close = type == Piece::Type::Output ? "}}" : "%}";
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance(1);
      if (pos_ >= src_.size()) error("tag is not closed");
      for (const char modifier : {'-', '+'}) {
        if (src_[pos_] == modifier && src_.substr(pos_ + 1, 2) == close) {
          advance(3);
          p.tokens.push_back(Token{});
          pieces_.push_back(std::move(p));
          return modifier == '-';
        }
      }
      if (src_.substr(pos_, 2) == close) {
        advance(2);
        p.tokens.push_back(Token{});
        pieces_.push_back(std::move(p));
        return false;
      }
      p.tokens.push_back(token());
    }
  }

  Token token() {
    const char c = src_[pos_];
    Token t;
    if (is_name_start(c)) {
      size_t end = pos_;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      t.type = Token::Type::Name;
      t.text = std::string(src_.substr(pos_, end - pos_));
      advance(end - pos_);
      return t;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number();
    if (c == '\'' || c == '"') return string_literal(c);
    static constexpr std::string_view kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
    for (const std::string_view op : kTwo) {
      if (src_.substr(pos_, 2) == op) {
        advance(2);
        return Token{Token::Type::Op, std::string(op)};
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) {
      advance(1);
      return Token{Token::Type::Op, std::string(1, c)};
    }
    error(str_cat("unexpected character '", c, "' in a tag"));
  }

  Token number() {
    size_t end = pos_;
    bool is_float = false;
    while (end < src_.size() &&
           (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_' ||
            (src_[end] == '.' && !is_float && end + 1 < src_.size() &&
             std::isdigit(static_cast<unsigned char>(src_[end + 1]))))) {
      if (src_[end] == '.') is_float = true;
      ++end;
    }
    std::string digits;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    advance(end - pos_);
    Token t;
    t.type = is_float ? Token::Type::Float : Token::Type::Int;
    t.text = digits;
    if (is_float)
      t.float_value = std::strtod(digits.c_str(), nullptr);
    else
      t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
    return t;
  }

  // Python's string literal escapes; an unknown escape keeps its backslash, as Python does.
  Token string_literal(char quote) {
    Token t;
    t.type = Token::Type::String;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) error("string is not closed");
      const char c = src_[i++];
      if (c == quote) break;
      if (c != '\\' || i >= src_.size()) {
        t.text += c;
        continue;
      }
      const char e = src_[i++];
      switch (e) {
        case 'n':
          t.text += '\n';
          break;
        case 't':
          t.text += '\t';
          break;
        case 'r':
          t.text += '\r';
          break;
        case '0':
          t.text += '\0';
          break;
        case '\\':
          t.text += '\\';
          break;
        case '\'':
          t.text += '\'';
          break;
        case '"':
          t.text += '"';
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + digits > src_.size()) error("short escape in a string");
          const std::string hex(src_.substr(i, digits));
          append_utf8(static_cast<uint32_t>(std::strtoul(hex.c_str(), nullptr, 16)), t.text);
          i += digits;
          break;
        }
        default:
          t.text += '\\';
          t.text += e;
      }
    }
    advance(i - pos_);
    return t;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Piece> pieces_;
};

}  // namespace

std::vector<Piece> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace hearth::text::jinja
