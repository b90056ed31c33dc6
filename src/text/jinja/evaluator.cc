// Expressions: names, literals, attribute and subscript access, slices, calls, and the operators
// with Python's meaning (Jinja hands them to Python).
#include "text/jinja/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "text/unicode.h"

namespace hearth::text::jinja {

void eval_error(int line, const std::string& what) {
  fail("chat template line ", line, ": ", what);
}

Context::Context(Frame globals) {
  frames_.push_back(std::make_shared<Frame>(std::move(globals)));
  push();
}

Value Context::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    const auto found = (*it)->find(name);
    if (found != (*it)->end()) return found->second;
  }
  return {};
}

void Context::count_iteration() {
  if (++iterations_ > kMaxLoopIterations) {
    fail("chat template: more than ", kMaxLoopIterations, " loop iterations");
  }
}

std::vector<std::shared_ptr<Frame>> Context::enter_macro() {
  if (macro_depth_ >= kMaxMacroDepth) {
    fail("chat template: macros nested more than ", kMaxMacroDepth, " deep (endless recursion?)");
  }
  ++macro_depth_;
  std::vector<std::shared_ptr<Frame>> saved = frames_;
  frames_ = {saved[0], saved[1], std::make_shared<Frame>()};
  return saved;
}

size_t code_point_count(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = std::min(utf8_len_lenient(static_cast<uint8_t>(s[i])), s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

void Output::append(const Value& v) {
  const Value t = as_text(v);
  const size_t at = text.size();
  text += t.as_string();
  for (const auto& [b, e] : t.content()) {
    if (!content.empty() && content.back().second == at + b) {
      content.back().second = at + e;
    } else {
      content.emplace_back(at + b, at + e);
    }
  }
}

Value as_text(const Value& v) {
  if (v.is_string()) return v;
  return v.has_content() ? Value::all_content(v.str()) : Value(v.str());
}

Value concat(const Value& a, const Value& b) {
  Output out;
  out.append(a);
  out.append(b);
  return Value::content_string(std::move(out.text), std::move(out.content));
}

Value derived(Value result, const Value& source, const std::vector<Value>& args) {
  if (result.has_content()) return result;
  bool inputs = source.has_content();
  for (const Value& a : args) inputs = inputs || a.has_content();
  if (!inputs) return result;
  if (result.is_string()) return Value::all_content(result.as_string());
  if (!result.is_list()) return result;
  std::vector<Value> items;
  for (const Value& item : result.as_list()) {
    items.push_back(item.is_string() ? Value::all_content(item.as_string()) : item);
  }
  return Value::list(std::move(items));
}

std::vector<Value> items_of(const Value& v, const std::string& what, int line) {
  if (v.is_list()) return v.as_list();
  if (v.is_undefined() || v.is_none()) return {};
  std::vector<Value> out;
  if (v.kind() == Value::Kind::Dict) {
    const bool content = v.as_dict().content_keys;
    for (const auto& [k, _] : v.as_dict().items) {
      out.push_back(content ? Value::all_content(k) : Value(k));
    }
  } else if (v.is_string()) {
    for (std::string& c : code_points(v.as_string())) {
      out.push_back(v.has_content() ? Value::all_content(std::move(c)) : Value(std::move(c)));
    }
  } else {
    eval_error(line, str_cat(what, " cannot iterate over a ", v.type_name()));
  }
  return out;
}

bool less_than(const Value& a, const Value& b, int line) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  eval_error(line, str_cat("cannot compare a ", a.type_name(), " with a ", b.type_name()));
}

namespace {

// Python's index rules: negative counts from the end; nullopt when out of range.
std::optional<size_t> py_index(int64_t i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(i);
}

Value get_item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) eval_error(line, "subscript of an undefined value");
  if (obj.is_mapping()) {
    if (!key.is_string()) return {};
    const Value* v = obj.as_dict().find(key.as_string());
    return v ? *v : Value();
  }
  if ((obj.is_list() || obj.is_string()) && key.kind() == Value::Kind::Int) {
    if (obj.is_list()) {
      const auto i = py_index(key.as_int(), obj.as_list().size());
      return i ? obj.as_list()[*i] : Value();
    }
    const std::vector<std::string> cps = code_points(obj.as_string());
    const auto i = py_index(key.as_int(), cps.size());
    return i ? derived(Value(cps[*i]), obj, {}) : Value();
  }
  return {};  // Jinja: an item that is not there is undefined
}

bool is_one_of(const std::string& name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Jinja looks an attribute up as a Python attribute first, then as an item: `d.items` is the
// dict's method even when the dict has an "items" key (JSON schemas do), and the sandbox hides the
// methods that would change it. Strings' methods likewise.
Value get_attr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) eval_error(line, str_cat("'", name, "' of an undefined value"));
  const bool dict = obj.kind() == Value::Kind::Dict;
  const bool method =
      (dict && is_one_of(name, {"items", "keys", "values", "get", "copy"})) ||
      (obj.is_string() &&
       is_one_of(name, {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper",
                        "lower", "title", "capitalize", "replace", "find", "count"}));
  if (method) {
    return Value::function(name, [obj, name, line](std::vector<Value>& args, KwArgs& kwargs) {
      return call_method(obj, name, args, kwargs, line);
    });
  }
  if (dict && is_one_of(name, {"pop", "popitem", "update", "clear", "setdefault", "fromkeys"})) {
    return {};
  }
  if (obj.is_mapping()) {
    const Value* v = obj.as_dict().find(name);
    return v ? *v : Value();
  }
  return {};
}

int64_t slice_bound(const Expr* e, Context& ctx, int64_t fallback) {
  if (!e) return fallback;
  const Value v = evaluate(*e, ctx);
  if (v.is_none()) return fallback;
  if (v.kind() != Value::Kind::Int) eval_error(e->line, "slice bounds must be integers");
  return v.as_int();
}

// Python's slice of a sequence of `n` items: the indices it takes, in order.
std::vector<size_t> slice_indices(const Expr& e, Context& ctx, size_t n) {
  const int64_t size = static_cast<int64_t>(n);
  const int64_t step = slice_bound(e.args[3].get(), ctx, 1);
  if (step == 0) eval_error(e.line, "slice step cannot be zero");
  const auto clamp = [&](int64_t i) {
    if (i < 0) i += size;
    if (step > 0) return std::clamp<int64_t>(i, 0, size);
    return std::clamp<int64_t>(i, -1, size - 1);
  };
  int64_t start =
      e.args[1] ? clamp(slice_bound(e.args[1].get(), ctx, 0)) : (step > 0 ? 0 : size - 1);
  int64_t stop = e.args[2] ? clamp(slice_bound(e.args[2].get(), ctx, 0)) : (step > 0 ? size : -1);
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(static_cast<size_t>(i));
  }
  return out;
}

Value slice(const Expr& e, Context& ctx) {
  const Value obj = evaluate(*e.args[0], ctx);
  if (obj.is_list()) {
    std::vector<Value> out;
    for (const size_t i : slice_indices(e, ctx, obj.as_list().size())) {
      out.push_back(obj.as_list()[i]);
    }
    return Value::list(std::move(out));
  }
  if (obj.is_string()) {
    const std::vector<std::string> cps = code_points(obj.as_string());
    std::string out;
    for (const size_t i : slice_indices(e, ctx, cps.size())) out += cps[i];
    return derived(Value(std::move(out)), obj, {});
  }
  eval_error(e.line, str_cat("cannot slice a ", obj.type_name()));
}

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    if (!item.is_string()) eval_error(line, "'in <string>' needs a string on the left");
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.as_list()) {
      if (v.equals(item)) return true;
    }
    return false;
  }
  if (container.is_mapping()) return item.is_string() && container.as_dict().find(item.as_string());
  eval_error(line, str_cat("'in' needs a string, list or dict, not a ", container.type_name()));
}

// Python's integers do not overflow; ours are 64-bit, and going past them is an Error.
Value integer_arithmetic(const std::string& op, int64_t i, int64_t j, int line) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+")
    overflow = __builtin_add_overflow(i, j, &r);
  else if (op == "-")
    overflow = __builtin_sub_overflow(i, j, &r);
  else if (op == "*")
    overflow = __builtin_mul_overflow(i, j, &r);
  else if (op == "**") {
    r = 1;
    for (int64_t k = 0; k < j && !overflow; ++k) overflow = __builtin_mul_overflow(r, i, &r);
  } else if (i == std::numeric_limits<int64_t>::min() && j == -1)
    overflow = true;
  else {
    const int64_t q = i / j - ((i % j != 0) && ((i < 0) != (j < 0)));  // floor division
    r = op == "//" ? q : i - q * j;
  }
  if (overflow) eval_error(line, str_cat("integer overflow in ", i, " ", op, " ", j));
  return Value(r);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "+" && a.is_string() && b.is_string()) return concat(a, b);
  if (op == "+" && a.is_list() && b.is_list()) {
    std::vector<Value> out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(out));
  }
  if (op == "*" && a.is_string() && b.kind() == Value::Kind::Int) {
    const int64_t n = std::max<int64_t>(b.as_int(), 0);
    if (n > 0 && a.as_string().size() > kMaxStringBytes / static_cast<uint64_t>(n)) {
      eval_error(line, "string repetition too long");
    }
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += a.as_string();
    return derived(Value(std::move(out)), a, {});
  }
  if (!a.is_number() || !b.is_number()) {
    eval_error(line, str_cat("unsupported operand types for ", op, ": ", a.type_name(), " and ",
                             b.type_name()));
  }
  const bool ints = a.kind() == Value::Kind::Int && b.kind() == Value::Kind::Int;
  const double x = a.as_double(), y = b.as_double();
  if ((op == "/" || op == "//" || op == "%") && y == 0) eval_error(line, "division by zero");
  if (op == "/") return Value(x / y);
  if (ints && (op != "**" || b.as_int() >= 0)) {
    return integer_arithmetic(op, a.as_int(), b.as_int(), line);
  }
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") return Value(x - std::floor(x / y) * y);
  return Value(std::pow(x, y));
}

Value binary(const Expr& e, Context& ctx) {
  const std::string& op = e.name;
  const Value a = evaluate(*e.args[0], ctx);
  // `and` and `or` give back an operand, as in Python, and skip the right one when they can.
  if (op == "and") return a.truthy() ? evaluate(*e.args[1], ctx) : a;
  if (op == "or") return a.truthy() ? a : evaluate(*e.args[1], ctx);
  const Value b = evaluate(*e.args[1], ctx);
  if (op == "~") return concat(as_text(a), as_text(b));
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "<") return Value(less_than(a, b, e.line));
  if (op == ">") return Value(less_than(b, a, e.line));
  if (op == "<=") return Value(!less_than(b, a, e.line));
  if (op == ">=") return Value(!less_than(a, b, e.line));
  if (op == "in") return Value(contains(b, a, e.line));
  if (op == "not in") return Value(!contains(b, a, e.line));
  return arithmetic(op, a, b, e.line);
}

Value call(const Expr& e, Context& ctx) {
  std::vector<Value> args;
  for (size_t i = 1; i < e.args.size(); ++i) args.push_back(evaluate(*e.args[i], ctx));
  KwArgs kwargs;
  for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, evaluate(*v, ctx));
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Kind::Attr) {
    const Value object = evaluate(*callee.args[0], ctx);
    if (object.is_undefined())
      eval_error(e.line, str_cat("'", callee.name, "' of an undefined value"));
    if (!object.is_mapping() || object.kind() == Value::Kind::Dict) {
      const Value* member = object.is_mapping() ? object.as_dict().find(callee.name) : nullptr;
      if (!member || member->kind() != Value::Kind::Function) {
        return call_method(object, callee.name, args, kwargs, e.line);
      }
    }
  }
  const Value fn = evaluate(callee, ctx);
  if (fn.kind() != Value::Kind::Function) {
    eval_error(e.line, str_cat("cannot call a ", fn.type_name(),
                               callee.kind == Expr::Kind::Name ? " ('" + callee.name + "')" : ""));
  }
  return fn.call(args, kwargs);
}

}  // namespace

Value evaluate(const Expr& e, Context& ctx) {
  switch (e.kind) {
    case Expr::Kind::Literal:
      return e.literal;
    case Expr::Kind::Name:
      return ctx.lookup(e.name);
    case Expr::Kind::Attr:
      return get_attr(evaluate(*e.args[0], ctx), e.name, e.line);
    case Expr::Kind::Index:
      return get_item(evaluate(*e.args[0], ctx), evaluate(*e.args[1], ctx), e.line);
    case Expr::Kind::Slice:
      return slice(e, ctx);
    case Expr::Kind::Call:
      return call(e, ctx);
    case Expr::Kind::Filter:
    case Expr::Kind::Test: {
      const Value operand = evaluate(*e.args[0], ctx);
      std::vector<Value> args;
      for (size_t i = 1; i < e.args.size(); ++i) args.push_back(evaluate(*e.args[i], ctx));
      KwArgs kwargs;
      for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, evaluate(*v, ctx));
      if (e.kind == Expr::Kind::Filter)
        return apply_filter(e.name, operand, args, kwargs, ctx, e.line);
      return Value(apply_test(e.name, operand, args, ctx, e.line) != e.negated);
    }
    case Expr::Kind::Unary: {
      const Value v = evaluate(*e.args[0], ctx);
      if (e.name == "not") return Value(!v.truthy());
      if (!v.is_number()) eval_error(e.line, str_cat("bad operand for unary ", e.name));
      if (e.name == "+") return v;
      return v.kind() == Value::Kind::Int ? Value(-v.as_int()) : Value(-v.as_double());
    }
    case Expr::Kind::Binary:
      return binary(e, ctx);
    case Expr::Kind::Cond:
      if (evaluate(*e.args[1], ctx).truthy()) return evaluate(*e.args[0], ctx);
      return e.args[2] ? evaluate(*e.args[2], ctx) : Value();
    case Expr::Kind::List: {
      std::vector<Value> items;
      for (const ExprPtr& a : e.args) items.push_back(evaluate(*a, ctx));
      return Value::list(std::move(items));
    }
    case Expr::Kind::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value key = evaluate(*e.args[i], ctx);
        if (!key.is_string()) eval_error(e.line, "dict keys must be strings");
        d.set(key.as_string(), evaluate(*e.args[i + 1], ctx));
      }
      return Value::dict(std::move(d));
    }
  }
  return {};
}

}  // namespace hearth::text::jinja
