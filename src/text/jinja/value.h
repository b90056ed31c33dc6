// The values a chat template computes with, shaped after Python's as Jinja sees them: none,
// undefined, booleans, integers, floats, strings, lists, ordered dicts, namespaces and callables.
// Lists, dicts and namespaces are shared by reference (as in Python), so `{% set ns.x = ... %}`
// changes the namespace every name for it sees.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::text::jinja {

class Value;

// Keyword arguments of a call, in the order written.
using KwArgs = std::vector<std::pair<std::string, Value>>;
using Callable = std::function<Value(std::vector<Value>& args, KwArgs& kwargs)>;

// A dict keeps its keys in insertion order, as Python's does; lookups are linear, which suits the
// few keys of a chat message.
// A byte range [first, second) of a string.
using TextRange = std::pair<size_t, size_t>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  // The keys came from a conversation (see mark_content): iterating them gives content strings.
  bool content_keys = false;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Value() = default;  // undefined
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  // By value, so that `v = <something inside v>` is safe: the argument is a full copy before v
  // lets go of the list or dict that held it.
  Value& operator=(Value other) noexcept;
  static Value none();
  Value(bool b);     // NOLINT(google-explicit-constructor): literals read naturally
  Value(int64_t i);  // NOLINT(google-explicit-constructor)
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT(google-explicit-constructor)
  Value(double d);                                  // NOLINT(google-explicit-constructor)
  Value(std::string s);                             // NOLINT(google-explicit-constructor)
  // A string of which the byte ranges `content` (ascending, disjoint, none empty) are a
  // conversation's own text rather than the template's; they travel through concatenation,
  // trimming and macros into the rendering, so that the caller can tokenize them as plain text.
  static Value content_string(std::string s, std::vector<TextRange> content);
  static Value all_content(std::string s);
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  static Value list(std::vector<Value> items = {});
  static Value dict(Dict d = {});
  static Value name_space(Dict d = {});
  static Value function(std::string name, Callable fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::Int ? static_cast<double>(int_) : float_; }
  const std::string& as_string() const { return *string_; }
  std::vector<Value>& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }
  const std::string& function_name() const { return *string_; }
  Value call(std::vector<Value>& args, KwArgs& kwargs) const { return (*function_)(args, kwargs); }
  // A string's content ranges (empty when it holds none).
  const std::vector<TextRange>& content() const;
  // Whether any content is in this value: a string's ranges, or a string or content key anywhere
  // inside a list or dict. Error past kMaxPrintDepth levels of nesting (a namespace can hold
  // itself).
  bool has_content(int depth = 0) const;

  // Python's truth value (undefined is false).
  bool truthy() const;
  // What `{{ value }}` prints: Python's str(), undefined as nothing.
  std::string str() const;
  // Python's repr(), used for strings inside printed lists and dicts. Error past kMaxPrintDepth
  // levels of nesting.
  std::string repr(int depth = 0) const;
  static constexpr int kMaxPrintDepth = 200;
  // Python's ==: numbers compare by value across int and float, containers element-wise.
  bool equals(const Value& other) const;
  // The name of the kind for error messages ("string", "list", ...).
  std::string_view type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<std::vector<Value>> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> function_;
  std::shared_ptr<const std::vector<TextRange>> content_;  // strings only; null: none
};

// `s` in `quote`s with backslash escapes: JSON's (\b, \f, \u00XX for other controls) when `json`,
// else Python repr's (\xXX for controls and DEL).
void append_quoted(const std::string& s, char quote, bool json, std::string& out);

// `v` with every string in it, and every dict key, marked as content (all_content): the messages
// of a conversation before a template renders them.
Value mark_content(const Value& v);

// JSON text -> Value (objects keep their key order). Error with the offset on malformed input.
Value parse_json(std::string_view text);

// Python's json.dumps(value, ensure_ascii=False, indent=indent) as HF's tojson filter calls it:
// ", " and ": " separators without indent, "," and newline-indented items with one.
// `indent` < 0 means none. Error for values JSON cannot hold (functions, undefined).
std::string to_json(const Value& value, int indent = -1);

}  // namespace hearth::text::jinja
