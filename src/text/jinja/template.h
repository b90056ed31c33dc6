// A Jinja chat template (tokenizer.chat_template), parsed once and rendered per conversation with
// Hugging Face's settings: trim_blocks, lstrip_blocks, loop controls, raise_exception, tojson,
// strftime_now. The language subset is what real chat templates use; anything else is an Error
// naming the line, never a silent guess.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/jinja/value.h"

namespace hearth::text::jinja {

// The template's own raise_exception(message): what() is the message as the template wrote it.
class TemplateRaised : public Error {
 public:
  explicit TemplateRaised(const std::string& message) : Error(message) {}
};

class Template {
 public:
  // Error (the line and what is wrong) when the source is not valid in the supported subset.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `variables` (a dict: messages, add_generation_prompt, bos_token, ...) over the
  // built-in functions; `now` is the date strftime_now formats. TemplateRaised when the template
  // raises, Error on an evaluation error (an undefined value's attribute, a type mismatch, ...).
  std::string render(const Value& variables, const std::tm& now) const;

  // As render, with the byte ranges of the text that came from content strings in `variables`
  // (see Value::content_string and mark_content), ascending and disjoint.
  struct Rendered {
    std::string text;
    std::vector<TextRange> content;
  };
  Rendered render_with_content(const Value& variables, const std::tm& now) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::text::jinja
