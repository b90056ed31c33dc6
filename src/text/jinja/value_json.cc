// JSON in and out of template values: messages arrive as JSON, and templates print tools and
// arguments with the tojson filter.
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "text/jinja/value.h"
#include "text/unicode.h"

namespace hearth::text::jinja {
namespace {

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != text_.size()) error("trailing text");
    return v;
  }

 private:
  // Nesting is bounded so that hostile input cannot exhaust the stack.
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void error(std::string_view what) const {
    fail("JSON: ", what, " at offset ", pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) error("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (eat_word("true")) return Value(true);
    if (eat_word("false")) return Value(false);
    if (eat_word("null")) return Value::none();
    return number();
  }

  Value object(int depth) {
    ++pos_;
    Dict d;
    if (eat('}')) return Value::dict(std::move(d));
    do {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') error("expected a key");
      std::string key = string();
      if (!eat(':')) error("expected ':'");
      d.set(std::move(key), value(depth + 1));
    } while (eat(','));
    if (!eat('}')) error("expected ',' or '}'");
    return Value::dict(std::move(d));
  }

  Value array(int depth) {
    ++pos_;
    std::vector<Value> items;
    if (eat(']')) return Value::list(std::move(items));
    do {
      items.push_back(value(depth + 1));
    } while (eat(','));
    if (!eat(']')) error("expected ',' or ']'");
    return Value::list(std::move(items));
  }

  uint32_t hex4() {
    if (pos_ + 4 > text_.size()) error("short \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= h - '0';
      else if (h >= 'a' && h <= 'f')
        cp |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        cp |= h - 'A' + 10;
      else
        error("bad \\u escape");
    }
    return cp;
  }

  std::string string() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) error("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            const uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) error("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xD800 && cp < 0xE000) {
            error("unpaired surrogate");
          }
          append_utf8(cp, out);
          break;
        }
        default:
          error("bad escape");
      }
    }
  }

  Value number() {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    bool is_float = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_float = true;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string digits(text_.substr(start, pos_ - start));
    if (digits.empty() || digits == "-") error("unexpected character");
    char* end = nullptr;
    if (!is_float) {
      const long long i = std::strtoll(digits.c_str(), &end, 10);
      if (*end == 0) return Value(static_cast<int64_t>(i));
    }
    const double d = std::strtod(digits.c_str(), &end);
    if (*end != 0) error("malformed number");
    return Value(d);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

void json_string(const std::string& s, std::string& out) { append_quoted(s, '"', true, out); }

void write_json(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * level, ' ');
  };
  const char* sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
    case Value::Kind::Float:
      out += v.repr();
      return;
    case Value::Kind::String:
      json_string(v.as_string(), out);
      return;
    case Value::Kind::List: {
      const auto& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        if (indent >= 0) newline(depth + 1);
        write_json(items[i], indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      const auto& items = v.as_dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        if (indent >= 0) newline(depth + 1);
        json_string(items[i].first, out);
        out += ": ";
        write_json(items[i].second, indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    default:
      fail("tojson: a ", v.type_name(), " is not JSON serializable");
  }
}

}  // namespace

Value parse_json(std::string_view text) { return JsonReader(text).document(); }

std::string to_json(const Value& value, int indent) {
  std::string out;
  write_json(value, indent, 0, out);
  return out;
}

}  // namespace hearth::text::jinja
