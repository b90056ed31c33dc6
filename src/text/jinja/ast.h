// The parsed template: expression and statement trees. One node type each, with a kind and the
// children that kind uses, keeps the evaluator a pair of switches.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace hearth::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // literal
    Name,     // name
    Attr,     // args[0].name
    Index,    // args[0][args[1]]
    Slice,    // args[0][args[1]:args[2]:args[3]], any of the three may be null
    Call,     // args[0](args[1..], kwargs)
    Filter,   // args[0] | name(args[1..], kwargs)
    Test,     // args[0] is [not] name(args[1..])
    Unary,    // name ("not", "-", "+") args[0]
    Binary,   // args[0] name args[1]; name is the operator ("and", "in", "not in", "~", ...)
    Cond,     // args[0] if args[1] else args[2] (args[2] may be null)
    List,     // [args...]
    Dict,     // {args[0]: args[1], args[2]: args[3], ...}
  };
  Kind kind = Kind::Literal;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // Test only
  int line = 0;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, Macro, Break, Continue };
  Kind kind = Kind::Text;
  std::string text;  // Text: the text; Macro: its name
  ExprPtr expr;      // Output: what to print; For: the iterable; Set: the value
  // For: the loop variables; Set: the name, or {namespace, attribute}; Macro: parameter names.
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;                   // Macro: one per parameter, null where none
  ExprPtr filter;                                  // For: the `if` after the iterable, or null
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, body) for if and each elif
  Body body;                                       // For, Macro
  Body else_body;              // If: else; For: else (runs when nothing was iterated)
  bool set_attribute = false;  // Set: names is {namespace, attribute}
  int line = 0;
};

}  // namespace hearth::text::jinja
