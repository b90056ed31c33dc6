// The filters real chat templates use, with Jinja's (Python's) results.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "text/jinja/evaluator.h"

namespace hearth::text::jinja {
namespace {

const Value* kwarg(KwArgs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Positional argument i, else keyword `name`, else `fallback`.
Value param(std::vector<Value>& args, KwArgs& kwargs, size_t i, std::string_view name,
            Value fallback) {
  if (i < args.size()) return args[i];
  if (const Value* v = kwarg(kwargs, name)) return *v;
  return fallback;
}

std::string map_ascii(const std::string& s, int (*fn)(int)) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x80)
      c = static_cast<char>(fn(static_cast<unsigned char>(c)));
  }
  return out;
}

// Jinja's indent: the text with a newline appended is cut into lines (Python's splitlines on
// \n, \r\n and \r); every line but the first gets the prefix, blank ones only with blank=true, and
// the first too with first=true.
std::string indent(const std::string& s, const Value& width, bool first, bool blank, int line) {
  if (!width.is_string() &&
      (width.kind() != Value::Kind::Int || width.as_int() < 0 || width.as_int() > 1000)) {
    eval_error(line, "indent width must be a string or an integer from 0 to 1000");
  }
  const std::string pad =
      width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  const std::string text = s + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  std::string out = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += '\n';
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  return first ? pad + out : out;
}

Value attribute_of(const Value& item, const Value& attr) {
  if (!item.is_mapping() || !attr.is_string()) return {};
  const Value* v = item.as_dict().find(attr.as_string());
  return v ? *v : Value();
}

// select / reject / selectattr / rejectattr.
Value select(const std::string& name, const Value& operand, std::vector<Value>& args, Context& ctx,
             int line) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep_if = name == "select" || name == "selectattr";
  size_t first_test_arg = by_attr ? 1 : 0;
  if (by_attr && args.empty()) eval_error(line, str_cat(name, " needs an attribute name"));
  std::vector<Value> out;
  for (const Value& item : items_of(operand, "filter '" + name + "'", line)) {
    const Value subject = by_attr ? attribute_of(item, args[0]) : item;
    bool pass;
    if (args.size() > first_test_arg) {
      const Value& test = args[first_test_arg];
      if (!test.is_string()) eval_error(line, str_cat(name, ": the test name must be a string"));
      std::vector<Value> test_args(args.begin() + first_test_arg + 1, args.end());
      pass = apply_test(test.as_string(), subject, test_args, ctx, line);
    } else {
      pass = subject.truthy();
    }
    if (pass == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

// Filters on text: trimming, case, JSON, indentation, replacement.
std::optional<Value> text_filter(const std::string& name, const Value& v, std::vector<Value>& args,
                                 KwArgs& kwargs, Context& ctx, int line) {
  (void)ctx;
  (void)line;
  if (name == "trim")
    return strip_value(v, param(args, kwargs, 0, "chars", Value::none()), true, true);
  if (name == "tojson") {
    const Value ind = param(args, kwargs, 0, "indent", Value::none());
    if (ind.kind() == Value::Kind::Int && ind.as_int() > 100)
      eval_error(line, "tojson indent over 100");
    return Value(to_json(v, ind.kind() == Value::Kind::Int ? static_cast<int>(ind.as_int()) : -1));
  }
  if (name == "string") return Value(v.str());
  if (name == "upper") return Value(map_ascii(v.str(), [](int c) { return std::toupper(c); }));
  if (name == "lower") return Value(map_ascii(v.str(), [](int c) { return std::tolower(c); }));
  if (name == "capitalize" || name == "title") {
    std::string s = map_ascii(v.str(), [](int c) { return std::tolower(c); });
    bool start = true;
    for (char& c : s) {
      if (start && std::isalpha(static_cast<unsigned char>(c)))
        c = static_cast<char>(std::toupper(c));
      start = name == "title" ? !std::isalnum(static_cast<unsigned char>(c)) : false;
    }
    return Value(std::move(s));
  }
  if (name == "indent") {
    const Value width = param(args, kwargs, 0, "width", Value(int64_t{4}));
    const bool first = param(args, kwargs, 1, "first", Value(false)).truthy();
    const bool blank = param(args, kwargs, 2, "blank", Value(false)).truthy();
    return Value(indent(v.str(), width, first, blank, line));
  }
  if (name == "replace") {
    const std::string s = v.str(), from = param(args, kwargs, 0, "old", Value("")).str(),
                      to = param(args, kwargs, 1, "new", Value("")).str();
    if (from.empty()) return Value(s);
    std::string out;
    size_t start = 0;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, start)) {
      out += s.substr(start, at - start) + to;
      start = at + from.size();
    }
    return Value(out + s.substr(start));
  }
  return std::nullopt;
}

// Filters on lists and dicts: sizes, items, joins, selections, maps.
std::optional<Value> sequence_filter(const std::string& name, const Value& v,
                                     std::vector<Value>& args, KwArgs& kwargs, Context& ctx,
                                     int line) {
  (void)ctx;
  (void)line;
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value(static_cast<int64_t>(code_point_count(v.as_string())));
    if (v.is_list()) return Value(static_cast<int64_t>(v.as_list().size()));
    if (v.is_mapping()) return Value(static_cast<int64_t>(v.as_dict().items.size()));
    if (v.is_undefined()) return Value(int64_t{0});
    eval_error(line, str_cat("a ", v.type_name(), " has no length"));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_mapping())
      eval_error(line, str_cat("filter 'items' needs a dict, not a ", v.type_name()));
    return Value::list(dict_items(v.as_dict()));
  }
  if (name == "list") return Value::list(items_of(v, "filter '" + name + "'", line));
  if (name == "first" || name == "last") {
    const std::vector<Value> items = items_of(v, "filter '" + name + "'", line);
    if (items.empty()) return {};
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const std::string sep = param(args, kwargs, 0, "d", Value("")).str();
    const Value attr = param(args, kwargs, 1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const Value& item : items_of(v, "filter '" + name + "'", line)) {
      if (!first) out += sep;
      first = false;
      out += (attr.is_none() ? item : attribute_of(item, attr)).str();
    }
    return Value(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return select(name, v, args, ctx, line);
  }
  if (name == "map") {
    std::vector<Value> out;
    const Value* attr = kwarg(kwargs, "attribute");
    for (const Value& item : items_of(v, "filter '" + name + "'", line)) {
      if (attr) {
        const Value got = attribute_of(item, *attr);
        out.push_back(got.is_undefined() ? param(args, kwargs, 99, "default", Value()) : got);
      } else if (!args.empty() && args[0].is_string()) {
        std::vector<Value> rest(args.begin() + 1, args.end());
        KwArgs none;
        out.push_back(apply_filter(args[0].as_string(), item, rest, none, ctx, line));
      } else {
        eval_error(line, "map needs a filter name or attribute=");
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "unique") {
    std::vector<Value> out;
    for (const Value& item : items_of(v, "filter '" + name + "'", line)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.equals(item); })) {
        out.push_back(item);
      }
    }
    return Value::list(std::move(out));
  }
  return std::nullopt;
}

// Defaults and number conversions.
std::optional<Value> value_filter(const std::string& name, const Value& v, std::vector<Value>& args,
                                  KwArgs& kwargs, Context& ctx, int line) {
  (void)ctx;
  (void)line;
  if (name == "default" || name == "d") {
    const bool boolean = param(args, kwargs, 1, "boolean", Value(false)).truthy();
    const bool use_default = v.is_undefined() || (boolean && !v.truthy());
    return use_default ? param(args, kwargs, 0, "default_value", Value("")) : v;
  }
  if (name == "int") {
    if (v.kind() == Value::Kind::Int) return v;
    if (v.kind() == Value::Kind::Float) return Value(static_cast<int64_t>(v.as_double()));
    try {
      return Value(static_cast<int64_t>(std::stoll(v.str())));
    } catch (const std::exception&) {
      return param(args, kwargs, 0, "default", Value(int64_t{0}));
    }
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_double());
    try {
      return Value(std::stod(v.str()));
    } catch (const std::exception&) {
      return param(args, kwargs, 0, "default", Value(0.0));
    }
  }
  if (name == "abs" && v.is_number()) {
    return v.kind() == Value::Kind::Int ? Value(static_cast<int64_t>(std::llabs(v.as_int())))
                                        : Value(std::fabs(v.as_double()));
  }
  if (name == "safe") return v;  // no autoescaping, as Hugging Face renders
  return std::nullopt;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, std::vector<Value>& args,
                   KwArgs& kwargs, Context& ctx, int line) {
  for (const auto filter : {text_filter, sequence_filter, value_filter}) {
    if (std::optional<Value> out = filter(name, v, args, kwargs, ctx, line)) {
      return derived(std::move(*out), v, args);
    }
  }
  eval_error(line, str_cat("unknown filter '", name, "'"));
}

}  // namespace hearth::text::jinja
