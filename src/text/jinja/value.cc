#include "text/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace hearth::text::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value& Value::operator=(Value other) noexcept {
  kind_ = other.kind_;
  bool_ = other.bool_;
  int_ = other.int_;
  float_ = other.float_;
  string_ = std::move(other.string_);
  list_ = std::move(other.list_);
  dict_ = std::move(other.dict_);
  function_ = std::move(other.function_);
  content_ = std::move(other.content_);
  return *this;
}

Value::Value(bool b) : kind_(Kind::Bool), bool_(b) {}
Value::Value(int64_t i) : kind_(Kind::Int), int_(i) {}
Value::Value(double d) : kind_(Kind::Float), float_(d) {}
Value::Value(std::string s)
    : kind_(Kind::String), string_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::content_string(std::string s, std::vector<TextRange> content) {
  Value v(std::move(s));
  if (!content.empty()) {
    v.content_ = std::make_shared<const std::vector<TextRange>>(std::move(content));
  }
  return v;
}

Value Value::all_content(std::string s) {
  const size_t n = s.size();
  return content_string(std::move(s),
                        n ? std::vector<TextRange>{{0, n}} : std::vector<TextRange>{});
}

const std::vector<TextRange>& Value::content() const {
  static const std::vector<TextRange> kNone;
  return content_ ? *content_ : kNone;
}

bool Value::has_content(int depth) const {
  if (depth > kMaxPrintDepth) fail("chat template: a value nested too deeply");
  switch (kind_) {
    case Kind::String:
      return content_ != nullptr;
    case Kind::List:
      for (const Value& item : *list_) {
        if (item.has_content(depth + 1)) return true;
      }
      return false;
    case Kind::Dict:
    case Kind::Namespace:
      if (dict_->content_keys && !dict_->items.empty()) return true;
      for (const auto& [k, item] : dict_->items) {
        if (item.has_content(depth + 1)) return true;
      }
      return false;
    default:
      return false;
  }
}

Value mark_content(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String:
      return Value::all_content(v.as_string());
    case Value::Kind::List: {
      std::vector<Value> items;
      for (const Value& item : v.as_list()) items.push_back(mark_content(item));
      return Value::list(std::move(items));
    }
    case Value::Kind::Dict: {
      Dict d;
      d.content_keys = true;
      for (const auto& [k, item] : v.as_dict().items) d.set(k, mark_content(item));
      return Value::dict(std::move(d));
    }
    default:
      return v;
  }
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::name_space(Dict d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::function(std::string name, Callable fn) {
  Value v;
  v.kind_ = Kind::Function;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  v.function_ = std::make_shared<const Callable>(std::move(fn));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return bool_;
    case Kind::Int:
      return int_ != 0;
    case Kind::Float:
      return float_ != 0;
    case Kind::String:
      return !string_->empty();
    case Kind::List:
      return !list_->empty();
    case Kind::Dict:
      return !dict_->items.empty();
    case Kind::Namespace:
    case Kind::Function:
      return true;
  }
  return false;
}

namespace {

// Python's repr of a float: the shortest text that reads back the same, always with a point or
// an exponent.
std::string float_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string string_repr(const std::string& s) {
  const char quote =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out;
  append_quoted(s, quote, /*json=*/false, out);
  return out;
}

}  // namespace

void append_quoted(const std::string& s, char quote, bool json, std::string& out) {
  out += quote;
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    const char* named = c == '\\'           ? "\\\\"
                        : c == '\n'         ? "\\n"
                        : c == '\r'         ? "\\r"
                        : c == '\t'         ? "\\t"
                        : json && c == '\b' ? "\\b"
                        : json && c == '\f' ? "\\f"
                                            : nullptr;
    if (named) {
      out += named;
    } else if (c == quote) {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || (!json && byte == 0x7F)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, json ? "\\u%04x" : "\\x%02x", byte);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return *string_;
    default:
      return repr();
  }
}

std::string Value::repr(int depth) const {
  // A namespace can hold itself ({% set ns.me = ns %}); printing one stops at a bounded depth.
  if (depth > kMaxPrintDepth) fail("chat template: a value nested too deeply to print");
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return bool_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(int_);
    case Kind::Float:
      return float_text(float_);
    case Kind::String:
      return string_repr(*string_);
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i)
        out += (i ? ", " : "") + (*list_)[i].repr(depth + 1);
      return out + "]";
    }
    case Kind::Dict:
    case Kind::Namespace: {
      std::string out = kind_ == Kind::Namespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        const auto& [k, v] = dict_->items[i];
        out += (i ? ", " : "") + string_repr(k) + ": " + v.repr(depth + 1);
      }
      return out + (kind_ == Kind::Namespace ? "}>" : "}");
    }
    case Kind::Function:
      return "<function " + *string_ + ">";
  }
  return "";
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::Int && other.kind_ == Kind::Int) return int_ == other.int_;
    return as_double() == other.as_double();
  }
  // Python's bool is an int: True == 1.
  if (kind_ == Kind::Bool && other.is_number()) return Value(int64_t{bool_}).equals(other);
  if (other.kind_ == Kind::Bool && is_number()) return other.equals(*this);
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::Bool:
      return bool_ == other.bool_;
    case Kind::String:
      return *string_ == *other.string_;
    case Kind::List: {
      if (list_->size() != other.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*other.list_)[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (dict_->items.size() != other.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* o = other.dict_->find(k);
        if (!o || !v.equals(*o)) return false;
      }
      return true;
    }
    default:
      return dict_ == other.dict_ && function_ == other.function_;
  }
}

std::string_view Value::type_name() const {
  static constexpr std::string_view kNames[] = {"undefined", "none",    "boolean", "integer",
                                                "float",     "string",  "list",    "dict",
                                                "namespace", "function"};
  return kNames[static_cast<int>(kind_)];
}

}  // namespace hearth::text::jinja
