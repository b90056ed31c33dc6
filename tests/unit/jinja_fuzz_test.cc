// Bad templates never crash: real chat templates (and a few snippets, when ../shared is absent)
// mutated at random, with a fixed seed, either render or fail with a hearth::Error. A crash, a
// hang or any other exception fails the test.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace hearth::text::jinja {
namespace {

// Pieces of Jinja syntax, so that mutations make near-valid templates, not only garbage.
const char* const kFragments[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "-", "+", "(", ")", "[", "]", "{", "}", "'", "\"", "|",
    ".", ",", ":", "~", "*", "**", "//", "%", "=", "==", " if ", " else ", " elif ", " for ",
    " in ", " not ", " is ", " and ", " or ", "endif", "endfor", "endmacro", "macro", "set",
    "loop", "ns", "messages", "messages[0]", "[::-1]", "[-1]", "|tojson", "|indent(4)", "|items",
    "raise_exception", "namespace(", "range(", "\n", " ", "\\", "0", "-1", "9999999999",
};

std::string mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng() % s.size();
    switch (rng() % 4) {
      case 0:
        s.erase(at, 1 + rng() % 8);
        break;
      case 1:
        s.insert(at, kFragments[rng() % std::size(kFragments)]);
        break;
      case 2:
        s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 40));
        break;
      default:
        s[at] = static_cast<char>(rng() % 256);
    }
  }
  return s;
}

TEST(JinjaFuzz, MutatedTemplatesRenderOrFailCleanly) {
  std::vector<std::string> seeds = {
      "{% for m in messages %}{{ m.role ~ ': ' ~ m.content | trim }}\n{% endfor %}",
      "{% set ns = namespace(i=0) %}{% for m in messages if m.role != 'system' %}"
      "{% set ns.i = ns.i + 1 %}{{ loop.index }}{{ m['content'][::-1] | tojson }}{% endfor %}",
      "{% macro f(x, d=2) %}{% if d > 0 %}{{ f(x, d - 1) }}{% endif %}{{ x }}{% endmacro %}"
      "{{ f(messages | length) }}{{ raise_exception('no') if false }}",
  };
  if (const auto shared = test::shared_dir()) {
    for (const char* name :
         {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "google-gemma-2-2b-it",
          "mistralai-Mistral-Nemo-Instruct-2407", "CohereForAI-c4ai-command-r-plus-tool_use"}) {
      seeds.push_back(test::read_file(*shared + "/chat-templates/" + name + ".jinja"));
    }
  }
  const Value vars = parse_json(
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": " Hi "},
          {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Bye"}],
          "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  std::mt19937 rng(1234);
  int rendered = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string source = mutate(seeds[i % seeds.size()], rng);
    try {
      Template(source).render(vars, std::tm{});
      ++rendered;
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a hearth::Error: " << e.what() << "\n" << source;
    }
  }
  std::printf("mutated templates: %d rendered, %d refused with an Error\n", rendered, refused);
  EXPECT_GT(rendered, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace hearth::text::jinja
