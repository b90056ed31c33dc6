// Tests (`is defined`, `is string`, ...), string and dict methods, and the global functions.
#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "text/jinja/evaluator.h"
#include "text/jinja/template.h"
#include "text/unicode.h"

namespace hearth::text::jinja {
namespace {

const Value& arg(std::vector<Value>& args, size_t i, const std::string& what, int line) {
  if (i >= args.size()) eval_error(line, str_cat(what, " needs ", i + 1, " argument(s)"));
  return args[i];
}

const std::string& string_arg(std::vector<Value>& args, size_t i, const std::string& what,
                              int line) {
  const Value& v = arg(args, i, what, line);
  if (!v.is_string()) eval_error(line, str_cat(what, " needs a string, not a ", v.type_name()));
  return v.as_string();
}

// Python's str.split(): on runs of whitespace when no separator is given.
Value split(const std::string& s, std::vector<Value>& args, int line) {
  std::vector<Value> parts;
  const bool by_space = args.empty() || args[0].is_none();
  const int64_t max_split =
      args.size() > 1 && args[1].kind() == Value::Kind::Int ? args[1].as_int() : -1;
  if (by_space) {
    size_t i = 0;
    while (true) {
      i = s.find_first_not_of(" \t\n\r\f\v", i);
      if (i == std::string::npos) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        parts.emplace_back(py_strip(s.substr(i), Value(), false, true));
        break;
      }
      const size_t end = std::min(s.find_first_of(" \t\n\r\f\v", i), s.size());
      parts.emplace_back(s.substr(i, end - i));
      i = end;
    }
    return Value::list(std::move(parts));
  }
  const std::string& sep = string_arg(args, 0, "split", line);
  if (sep.empty()) eval_error(line, "split: empty separator");
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos ||
        (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split)) {
      parts.emplace_back(s.substr(start));
      break;
    }
    parts.emplace_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  return Value::list(std::move(parts));
}

Value string_method(const std::string& s, const std::string& name, std::vector<Value>& args,
                    int line) {
  const Value none = args.empty() ? Value::none() : args[0];
  if (name == "split") return split(s, args, line);
  if (name == "startswith" || name == "endswith") {
    const std::string& affix = string_arg(args, 0, name, line);
    if (affix.size() > s.size()) return Value(false);
    return Value(name == "startswith"
                     ? s.compare(0, affix.size(), affix) == 0
                     : s.compare(s.size() - affix.size(), affix.size(), affix) == 0);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    std::vector<Value> none_args;
    KwArgs no_kwargs;
    Context scratch{Frame{}};
    return apply_filter(name, Value(s), none_args, no_kwargs, scratch, line);
  }
  if (name == "replace") {
    const std::string& from = string_arg(args, 0, name, line);
    const std::string& to = string_arg(args, 1, name, line);
    std::vector<Value> fargs{Value(from), Value(to)};
    KwArgs no_kwargs;
    Context scratch{Frame{}};
    return apply_filter("replace", Value(s), fargs, no_kwargs, scratch, line);
  }
  if (name == "find") {
    const size_t at = s.find(string_arg(args, 0, name, line));
    return Value(at == std::string::npos ? int64_t{-1}
                                         : static_cast<int64_t>(code_point_count(s.substr(0, at))));
  }
  if (name == "count") {
    const std::string& needle = string_arg(args, 0, name, line);
    int64_t n = 0;
    for (size_t at = s.find(needle); !needle.empty() && at != std::string::npos;
         at = s.find(needle, at + needle.size())) {
      ++n;
    }
    return Value(n);
  }
  eval_error(line, str_cat("strings have no method '", name, "'"));
}

}  // namespace

namespace {

// Python's str.isspace() for one code point.
bool py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

namespace {

// The byte range of `s` that Python's strip family keeps.
TextRange strip_bounds(const std::string& s, const Value& chars, bool left, bool right) {
  const std::vector<std::string> cps = code_points(s);
  const std::vector<std::string> set =
      chars.is_string() ? code_points(chars.as_string()) : std::vector<std::string>{};
  const auto strippable = [&](const std::string& cp) {
    if (chars.is_string()) return std::find(set.begin(), set.end(), cp) != set.end();
    size_t pos = 0;
    return py_space(utf8_next(cp, pos));
  };
  size_t b = 0, e = cps.size(), begin = 0, end = s.size();
  if (left) {
    while (b < e && strippable(cps[b])) begin += cps[b++].size();
  }
  if (right) {
    while (e > b && strippable(cps[e - 1])) end -= cps[--e].size();
  }
  return {begin, std::max(begin, end)};
}

// A dict key as a value: content when the dict came from a conversation.
Value key_value(const Dict& d, const std::string& key) {
  return d.content_keys ? Value::all_content(key) : Value(key);
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const auto [begin, end] = strip_bounds(s, chars, left, right);
  return s.substr(begin, end - begin);
}

Value strip_value(const Value& v, const Value& chars, bool left, bool right) {
  const Value text = as_text(v);
  const std::string& s = text.as_string();
  const auto [begin, end] = strip_bounds(s, chars, left, right);
  std::vector<TextRange> kept;
  for (const auto& [b, e] : text.content()) {
    const size_t cb = std::max(b, begin), ce = std::min(e, end);
    if (cb < ce) kept.emplace_back(cb - begin, ce - begin);
  }
  return Value::content_string(s.substr(begin, end - begin), std::move(kept));
}

std::vector<Value> dict_items(const Dict& d) {
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) out.push_back(Value::list({key_value(d, k), v}));
  return out;
}

Value call_method(const Value& object, const std::string& name, std::vector<Value>& args,
                  KwArgs& kwargs, int line) {
  (void)kwargs;
  if (object.is_string()) {
    const Value chars = args.empty() ? Value::none() : args[0];
    if (name == "strip") return strip_value(object, chars, true, true);
    if (name == "lstrip") return strip_value(object, chars, true, false);
    if (name == "rstrip") return strip_value(object, chars, false, true);
    return derived(string_method(object.as_string(), name, args, line), object, args);
  }
  if (object.kind() == Value::Kind::Dict) {
    const Dict& d = object.as_dict();
    if (name == "items") return Value::list(dict_items(d));
    if (name == "keys" || name == "values") {
      std::vector<Value> out;
      for (const auto& [k, v] : d.items) out.push_back(name == "keys" ? key_value(d, k) : v);
      return Value::list(std::move(out));
    }
    if (name == "copy") return Value::dict(d);
    if (name == "get") {
      const Value* v = d.find(string_arg(args, 0, "get", line));
      return v ? *v : (args.size() > 1 ? args[1] : Value::none());
    }
  }
  eval_error(line, str_cat("a ", object.type_name(), " has no method '", name, "'"));
}

bool apply_test(const std::string& name, const Value& v, std::vector<Value>& args, Context& ctx,
                int line) {
  (void)ctx;
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::Int;
  if (name == "float") return v.kind() == K::Float;
  if (name == "boolean") return v.kind() == K::Bool;
  if (name == "true") return v.kind() == K::Bool && v.as_bool();
  if (name == "false") return v.kind() == K::Bool && !v.as_bool();
  if (name == "mapping") return v.kind() == K::Dict;
  // Jinja's undefined iterates as nothing and has a length, so it passes both.
  if (name == "iterable" || name == "sequence") {
    return v.is_list() || v.is_string() || v.is_mapping() || v.is_undefined();
  }
  if (name == "callable") return v.kind() == K::Function;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    std::vector<Value> none_args;
    KwArgs no_kwargs;
    Context scratch{Frame{}};
    return apply_filter(name, v, none_args, no_kwargs, scratch, line).as_string() == v.as_string();
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") {
    return v.equals(arg(args, 0, name, line));
  }
  if (name == "ne" || name == "!=") return !v.equals(arg(args, 0, name, line));
  if (name == "in") {
    const Value& c = arg(args, 0, name, line);
    if (c.is_list()) {
      for (const Value& x : c.as_list()) {
        if (x.equals(v)) return true;
      }
      return false;
    }
    if (c.is_string() && v.is_string())
      return c.as_string().find(v.as_string()) != std::string::npos;
    if (c.is_mapping() && v.is_string()) return c.as_dict().find(v.as_string()) != nullptr;
    return false;
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (v.kind() != K::Int) eval_error(line, str_cat("test '", name, "' needs an integer"));
    if (name == "divisibleby") {
      const Value& d = arg(args, 0, name, line);
      return d.kind() == K::Int && d.as_int() != 0 && v.as_int() % d.as_int() == 0;
    }
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  if (name == "gt" || name == "lt" || name == "ge" || name == "le") {
    const Value& o = arg(args, 0, name, line);
    if (name == "gt") return less_than(o, v, line);
    if (name == "lt") return less_than(v, o, line);
    if (name == "ge") return !less_than(v, o, line);
    return !less_than(o, v, line);
  }
  eval_error(line, str_cat("unknown test '", name, "'"));
}

Frame builtin_globals(const std::tm& now, std::vector<Value>* namespaces) {
  Frame g;
  g["raise_exception"] =
      Value::function("raise_exception", [](std::vector<Value>& args, KwArgs&) -> Value {
        throw TemplateRaised(args.empty() ? std::string("raise_exception() called")
                                          : args[0].str());
      });
  g["namespace"] =
      Value::function("namespace", [namespaces](std::vector<Value>& args, KwArgs& kwargs) {
        Dict d;
        for (const Value& a : args) {
          if (a.kind() == Value::Kind::Dict) {
            for (const auto& [k, v] : a.as_dict().items) d.set(k, v);
          }
        }
        for (auto& [k, v] : kwargs) d.set(k, v);
        Value ns = Value::name_space(std::move(d));
        namespaces->push_back(ns);
        return ns;
      });
  g["dict"] = Value::function("dict", [](std::vector<Value>&, KwArgs& kwargs) {
    Dict d;
    for (auto& [k, v] : kwargs) d.set(k, v);
    return Value::dict(std::move(d));
  });
  g["range"] = Value::function("range", [](std::vector<Value>& args, KwArgs&) {
    int64_t start = 0, stop = 0, step = 1;
    for (const Value& a : args) {
      if (a.kind() != Value::Kind::Int) fail("chat template: range() takes integers");
    }
    if (args.size() == 1) stop = args[0].as_int();
    if (args.size() >= 2) start = args[0].as_int(), stop = args[1].as_int();
    if (args.size() == 3) step = args[2].as_int();
    if (args.empty() || args.size() > 3 || step == 0) fail("chat template: bad range() arguments");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 1'000'000) fail("chat template: range() is too long");
      out.emplace_back(i);
    }
    return Value::list(std::move(out));
  });
  g["strftime_now"] = Value::function("strftime_now", [now](std::vector<Value>& args, KwArgs&) {
    if (args.empty() || !args[0].is_string()) fail("chat template: strftime_now() needs a format");
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, args[0].as_string().c_str(), &now);
    return Value(std::string(buf, n));
  });
  return g;
}

}  // namespace hearth::text::jinja
