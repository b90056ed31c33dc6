#include "text/jinja/template.h"

#include "text/jinja/evaluator.h"
#include "text/jinja/parser.h"

namespace hearth::text::jinja {

struct Template::Impl {
  Body body;
};

Template::Template(std::string_view source) : impl_(std::make_unique<Impl>()) {
  impl_->body = parse_template(source);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& variables, const std::tm& now) const {
  return render_with_content(variables, now).text;
}

Template::Rendered Template::render_with_content(const Value& variables, const std::tm& now) const {
  struct Namespaces {
    std::vector<Value> made;
    ~Namespaces() {
      for (const Value& ns : made) ns.as_dict().items.clear();
    }
  } namespaces;
  Context ctx(builtin_globals(now, &namespaces.made));
  if (variables.is_mapping()) {
    for (const auto& [name, value] : variables.as_dict().items) ctx.set(name, value);
  }
  Output out;
  if (render_body(impl_->body, ctx, out) != Flow::Normal) {
    fail("chat template: break or continue outside a loop");
  }
  return {std::move(out.text), std::move(out.content)};
}

}  // namespace hearth::text::jinja
