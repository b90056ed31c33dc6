// Evaluation: expressions to values (evaluator.cc), statements to text (render.cc), and the
// built-in filters, tests, methods and globals (builtins.cc, builtins_filters.cc).
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace hearth::text::jinja {

using Frame = std::unordered_map<std::string, Value>;

// Variable scopes, innermost last. A for loop body and a macro call get frames of their own, so
// `set` inside them does not reach outside (Jinja's rule, which is what namespace() is for).
class Context {
 public:
  explicit Context(Frame globals);
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value value) {
    frames_.back()->insert_or_assign(name, std::move(value));
  }
  void push() { frames_.push_back(std::make_shared<Frame>()); }
  // Counts one loop iteration; Error past kMaxLoopIterations in one rendering.
  void count_iteration();
  void pop() { frames_.pop_back(); }
  // For a macro call: only the template's top level stays visible below the call's frame. Error
  // past kMaxMacroDepth nested calls.
  std::vector<std::shared_ptr<Frame>> enter_macro();
  void leave_macro(std::vector<std::shared_ptr<Frame>> saved) {
    frames_ = std::move(saved);
    --macro_depth_;
  }

 private:
  std::vector<std::shared_ptr<Frame>> frames_;
  int macro_depth_ = 0;
  int64_t iterations_ = 0;
};

// The longest string a template may build (by repetition or as its output), and the most loop
// iterations one rendering may run: a template that would need more is an Error, not a hang.
inline constexpr uint64_t kMaxStringBytes = uint64_t{64} << 20;
inline constexpr int64_t kMaxLoopIterations = 10'000'000;

// Macros calling macros deeper than this are an Error: a recursive template (one that recurses
// on a JSON schema forever, say) must not exhaust the stack.
inline constexpr int kMaxMacroDepth = 64;

Value evaluate(const Expr& expr, Context& ctx);

// Rendered text and the ranges of it that are a conversation's content (see Value::content).
struct Output {
  std::string text;
  std::vector<TextRange> content;
  void append(const Value& v);  // as `{{ v }}` prints it
  void append_text(std::string_view s) { text += s; }
};

// What a statement list asks of the loop around it.
enum class Flow { Normal, Break, Continue };
Flow render_body(const Body& body, Context& ctx, Output& out);

// Content tracking through operations. as_text: `v` as a string (its str()), content where `v`
// had any. concat: a + b with both strings' ranges. derived: a result computed from `source` and
// `args` by an operation that does not track ranges: unchanged when it has content of its own,
// else, when the inputs had content, every string in it (or in the list it is) marked whole.
Value as_text(const Value& v);
Value concat(const Value& a, const Value& b);
Value derived(Value result, const Value& source, const std::vector<Value>& args);
// A dict's (key, value) pairs; keys are content when the dict's are.
std::vector<Value> dict_items(const Dict& d);
// Python's strip family on a string value, its content ranges cut to what remains.
Value strip_value(const Value& s, const Value& chars, bool left, bool right);

// Error "chat template line N: ..." (a hearth::Error).
[[noreturn]] void eval_error(int line, const std::string& what);

// Built-ins. `line` is for error messages.
Value apply_filter(const std::string& name, const Value& operand, std::vector<Value>& args,
                   KwArgs& kwargs, Context& ctx, int line);
bool apply_test(const std::string& name, const Value& operand, std::vector<Value>& args,
                Context& ctx, int line);
// A method of a string or dict (`s.strip()`, `d.items()`); Error when there is none.
Value call_method(const Value& object, const std::string& name, std::vector<Value>& args,
                  KwArgs& kwargs, int line);
// The functions every template sees: namespace, range, raise_exception, strftime_now, dict.
// Every namespace made is added to `namespaces`, for the caller to empty after rendering: a
// namespace set to hold itself would otherwise keep itself alive.
Frame builtin_globals(const std::tm& now, std::vector<Value>* namespaces);

// What iterating `v` gives: a list's items, a dict's keys, a string's characters; undefined and
// none give nothing. Error naming `what` ("a for loop", "filter 'join'") for other kinds.
std::vector<Value> items_of(const Value& v, const std::string& what, int line);

// Strings count and slice by code point, as Python's do.
size_t code_point_count(const std::string& s);
std::vector<std::string> code_points(const std::string& s);
// Python's str.strip() family on whitespace or the given characters.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
// Python's value < value for numbers and strings; Error otherwise.
bool less_than(const Value& a, const Value& b, int line);

}  // namespace hearth::text::jinja
