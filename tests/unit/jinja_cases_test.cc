// The real chat templates in ../shared/chat-templates, rendered for every case in its cases.json:
// byte-identical to what Python's Jinja2 rendered with Hugging Face's settings, or the template's
// own raise_exception message where the case expects one.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace hearth::text::jinja {
namespace {

// The date the reference renderings fixed strftime_now to.
std::tm reference_date() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_wday = 4;
  t.tm_yday = 14;
  return t;
}

const Value& field(const Value& dict, const std::string& key) {
  const Value* v = dict.as_dict().find(key);
  if (!v) throw std::runtime_error("cases.json: missing '" + key + "'");
  return *v;
}

TEST(ChatTemplateCases, EveryCaseRendersAsJinja2Does) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/chat-templates/";
  const Value cases_file = parse_json(test::read_file(dir + "cases.json"));
  const Value& conversations = field(cases_file, "conversations");
  const Value& cases = field(cases_file, "cases");
  ASSERT_GE(cases.as_list().size(), 32u);
  size_t rendered = 0, raised = 0;
  for (const Value& c : cases.as_list()) {
    const std::string name =
        field(c, "template").as_string() + " / " + field(c, "conversation").as_string();
    SCOPED_TRACE(name);
    const Value& conversation = field(conversations, field(c, "conversation").as_string());
    Dict vars;
    vars.set("messages", field(conversation, "messages"));
    vars.set("add_generation_prompt", field(c, "add_generation_prompt"));
    vars.set("bos_token", field(c, "bos_token"));
    vars.set("eos_token", field(c, "eos_token"));
    const Template tmpl(test::read_file(dir + field(c, "template").as_string()));
    const Value* error = c.as_dict().find("error");
    if (error) {
      try {
        tmpl.render(Value::dict(vars), reference_date());
        ADD_FAILURE() << "rendered, but the case expects the error '" << error->as_string() << "'";
      } catch (const TemplateRaised& e) {
        EXPECT_EQ(std::string(e.what()), error->as_string());
        ++raised;
      }
      continue;
    }
    const std::string expected = test::read_file(dir + field(c, "expected").as_string());
    const std::string got = tmpl.render(Value::dict(vars), reference_date());
    EXPECT_EQ(got, expected);
    rendered += got == expected;
  }
  std::printf("chat templates: %zu cases byte-identical, %zu raised as expected, of %zu\n",
              rendered, raised, cases.as_list().size());
}

}  // namespace
}  // namespace hearth::text::jinja
