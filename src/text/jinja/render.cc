// Statements: text and output, if, for (with Jinja's loop variable), set, macros and the loop
// controls.
#include "core/error.h"
#include "text/jinja/evaluator.h"

namespace hearth::text::jinja {
namespace {

void bind_targets(const Node& n, const Value& item, Context& ctx) {
  if (n.names.size() == 1) {
    ctx.set(n.names[0], item);
    return;
  }
  if (!item.is_list() || item.as_list().size() != n.names.size()) {
    eval_error(n.line, str_cat("cannot unpack a ", item.type_name(), " into ", n.names.size(),
                               " loop variables"));
  }
  for (size_t i = 0; i < n.names.size(); ++i) ctx.set(n.names[i], item.as_list()[i]);
}

Value loop_variable(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  Dict loop;
  loop.set("index", Value(k + 1));
  loop.set("index0", Value(k));
  loop.set("revindex", Value(n - k));
  loop.set("revindex0", Value(n - k - 1));
  loop.set("first", Value(k == 0));
  loop.set("last", Value(k == n - 1));
  loop.set("length", Value(n));
  loop.set("previtem", k > 0 ? items[i - 1] : Value());
  loop.set("nextitem", k + 1 < n ? items[i + 1] : Value());
  return Value::dict(std::move(loop));
}

void render_for(const Node& n, Context& ctx, Output& out) {
  std::vector<Value> items = items_of(evaluate(*n.expr, ctx), "a for loop", n.line);
  ctx.push();
  // The `if` filter drops items before the loop counts them, as Jinja's does.
  if (n.filter) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      bind_targets(n, item, ctx);
      if (evaluate(*n.filter, ctx).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    ctx.count_iteration();
    ctx.pop();
    ctx.push();
    bind_targets(n, items[i], ctx);
    ctx.set("loop", loop_variable(items, i));
    if (render_body(n.body, ctx, out) == Flow::Break) break;
  }
  ctx.pop();
  if (items.empty()) render_body(n.else_body, ctx, out);
}

// A macro becomes a function value; calling it renders its body in a frame of its own.
Value make_macro(const Node& n, Context& ctx) {
  const Node* macro = &n;
  Context* context = &ctx;
  return Value::function(n.text, [macro, context](std::vector<Value>& args, KwArgs& kwargs) {
    if (args.size() > macro->names.size()) {
      eval_error(macro->line, str_cat("macro '", macro->text, "' takes ", macro->names.size(),
                                      " arguments, not ", args.size()));
    }
    std::vector<Value> bound(macro->names.size());
    std::vector<bool> given(macro->names.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      bound[i] = args[i];
      given[i] = true;
    }
    for (auto& [key, value] : kwargs) {
      size_t i = 0;
      while (i < macro->names.size() && macro->names[i] != key) ++i;
      if (i == macro->names.size()) {
        eval_error(macro->line, str_cat("macro '", macro->text, "' has no parameter '", key, "'"));
      }
      bound[i] = value;
      given[i] = true;
    }
    // Restores the caller's scopes however the body ends.
    struct Scope {
      Context* ctx;
      std::vector<std::shared_ptr<Frame>> saved;
      ~Scope() { ctx->leave_macro(std::move(saved)); }
    } scope{context, context->enter_macro()};
    for (size_t i = 0; i < bound.size(); ++i) {
      if (!given[i] && macro->defaults[i]) bound[i] = evaluate(*macro->defaults[i], *context);
      context->set(macro->names[i], bound[i]);
    }
    Output out;
    render_body(macro->body, *context, out);
    return Value::content_string(std::move(out.text), std::move(out.content));
  });
}

void render_set(const Node& n, Context& ctx) {
  Value value;
  if (n.expr) {
    value = evaluate(*n.expr, ctx);
  } else {
    Output text;
    render_body(n.body, ctx, text);
    value = Value::content_string(std::move(text.text), std::move(text.content));
  }
  if (!n.set_attribute) {
    ctx.set(n.names[0], std::move(value));
    return;
  }
  const Value target = ctx.lookup(n.names[0]);
  if (target.kind() != Value::Kind::Namespace) {
    eval_error(n.line, str_cat("cannot set an attribute of '", n.names[0], "', which is a ",
                               target.type_name(), ", not a namespace"));
  }
  target.as_dict().set(n.names[1], std::move(value));
}

}  // namespace

Flow render_body(const Body& body, Context& ctx, Output& out) {
  for (const NodePtr& node : body) {
    const Node& n = *node;
    switch (n.kind) {
      case Node::Kind::Text:
        out.append_text(n.text);
        break;
      case Node::Kind::Output:
        out.append(evaluate(*n.expr, ctx));
        if (out.text.size() > kMaxStringBytes) eval_error(n.line, "the output is too long");
        break;
      case Node::Kind::If: {
        const Body* chosen = &n.else_body;
        for (const auto& [cond, branch] : n.branches) {
          if (evaluate(*cond, ctx).truthy()) {
            chosen = &branch;
            break;
          }
        }
        const Flow flow = render_body(*chosen, ctx, out);
        if (flow != Flow::Normal) return flow;
        break;
      }
      case Node::Kind::For:
        render_for(n, ctx, out);
        break;
      case Node::Kind::Set:
        render_set(n, ctx);
        break;
      case Node::Kind::Macro:
        ctx.set(n.text, make_macro(n, ctx));
        break;
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
    }
  }
  return Flow::Normal;
}

}  // namespace hearth::text::jinja
