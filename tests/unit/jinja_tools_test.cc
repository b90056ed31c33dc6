// Tool use through the real templates of ../shared/chat-templates: tool definitions (macros that
// recurse over JSON schemas, `|items`, `tojson(indent=4)`, `indent`), an assistant tool call, a
// tool result and the answer after it, compared byte for byte with Jinja2's renderings in
// tests/data/chat-tools (see its README).
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace hearth::text::jinja {
namespace {

TEST(ChatTemplateTools, ToolConversationsRenderAsJinja2Does) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string data = std::string(HEARTH_SOURCE_DIR) + "/tests/data/chat-tools/";
  const Value conversation = parse_json(test::read_file(data + "conversation.json"));
  for (const char* name :
       {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "CohereForAI-c4ai-command-r-plus-tool_use",
        "mistralai-Mistral-Nemo-Instruct-2407"}) {
    SCOPED_TRACE(name);
    const Template tmpl(test::read_file(shared + "/chat-templates/" + name + ".jinja"));
    EXPECT_EQ(tmpl.render(conversation, std::tm{}), test::read_file(data + name + ".txt"));
  }
}

}  // namespace
}  // namespace hearth::text::jinja
