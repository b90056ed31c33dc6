// ChatRenderer: which template a model gets (its own Jinja, a forced family, or the fallback with
// a warning), the BOS contract of the generation prompt, and the stop strings.
#include "text/chat_renderer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/jinja/template.h"

namespace hearth::text {
namespace {

// Shortened from Meta-Llama-3-8B-Instruct's template: it writes BOS itself.
const char* kLlama3 =
    "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
    "'<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";

const std::vector<ChatMessage> kChat = {{"system", "Be brief."}, {"user", " Hi "}};

TEST(ChatRenderer, TheModelsTemplateByDefault) {
  std::string note;
  const ChatRenderer r =
      ChatRenderer::from_model(std::string(kLlama3), "<|begin_of_text|>", "<|eot_id|>", &note);
  EXPECT_EQ(note, "chat template: the model's Jinja template");
  EXPECT_EQ(r.description(), "the model's Jinja template");
  const std::string body =
      "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(r.render(kChat, true), "<|begin_of_text|>" + body);
  // The prompt to tokenize leaves BOS to the vocabulary's add-BOS rule.
  EXPECT_EQ(r.render_prompt(kChat).text, body);
  EXPECT_EQ(r.render_json(R"({"messages": [{"role": "user", "content": "Hi"}]})", false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  // Llama 3's markers add its family's stops to the EOS text.
  const std::vector<std::string> stops = r.stop_strings();
  EXPECT_NE(std::find(stops.begin(), stops.end(), "<|start_header_id|>"), stops.end());
  EXPECT_NE(std::find(stops.begin(), stops.end(), "<|eot_id|>"), stops.end());
}

// The messages' own text is marked as content through the template's trim and concatenation, so
// that a control token a user types ("<|eot_id|>") is tokenized as text; the markup is not.
TEST(ChatRenderer, ContentRangesFollowTheMessagesText) {
  const ChatRenderer r =
      ChatRenderer::from_model(std::string(kLlama3), "<|begin_of_text|>", "<|eot_id|>", nullptr);
  const std::vector<ChatMessage> chat = {{"user", "  Hi <|eot_id|> there \n"}};
  const ChatPrompt p = r.render_prompt(chat);
  const std::string head = "<|start_header_id|>user<|end_header_id|>\n\n";
  ASSERT_EQ(p.text.substr(0, head.size()), head);
  // "user" (the role) is the conversation's too; the trimmed content follows the markup.
  std::vector<std::string> pieces;
  for (const auto& [b, e] : p.content) pieces.push_back(p.text.substr(b, e - b));
  EXPECT_EQ(pieces, (std::vector<std::string>{"user", "Hi <|eot_id|> there"}));
  // A built-in family reports its ranges the same way.
  const ChatPrompt f = ChatRenderer::from_family(ChatFamily::ChatMl).render_prompt(chat);
  ASSERT_EQ(f.content.size(), 1u);
  EXPECT_EQ(f.text.substr(f.content[0].first, f.content[0].second - f.content[0].first),
            chat[0].content);
}

TEST(ChatRenderer, FlagForcesAFamily) {
  std::string note;
  const ChatRenderer r = ChatRenderer::choose("chatml", std::string(kLlama3), "<s>", "</s>", &note);
  EXPECT_EQ(note, "chat template chatml (--chat-template)");
  EXPECT_EQ(r.render({{{"user", "Hi"}}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  try {
    ChatRenderer::choose("vicuna", std::nullopt, "", "", nullptr);
    ADD_FAILURE() << "an unknown family was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown chat template 'vicuna' (known: chatml"),
              std::string::npos);
  }
}

TEST(ChatRenderer, UnrenderableTemplatesFallBackWithAWarning) {
  std::string note;
  // Parses, but fails on a plain conversation: an unsupported filter in a Llama 3 template.
  const ChatRenderer bad = ChatRenderer::from_model(
      std::string("{{ '<|start_header_id|>' }}{{ messages | frobnicate }}"), "", "", &note);
  EXPECT_NE(note.find("warning: the model's chat template cannot be rendered"), std::string::npos)
      << note;
  EXPECT_NE(note.find("using llama3 (by its markers)"), std::string::npos) << note;
  EXPECT_EQ(bad.description(), "llama3");
  // Does not parse, and names no family: the default.
  ChatRenderer::from_model(std::string("{% for %}"), "", "", &note);
  EXPECT_NE(note.find("using chatml (default)"), std::string::npos) << note;
  // None at all.
  ChatRenderer::from_model(std::nullopt, "", "", &note);
  EXPECT_EQ(note, "chat template chatml (the model has none; default)");
}

// A template that refuses a system message (Gemma's) is still the model's template; it refuses
// such conversations with its own message.
TEST(ChatRenderer, TheTemplatesOwnRefusalReachesTheCaller) {
  std::string note;
  const ChatRenderer r = ChatRenderer::from_model(
      std::string("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
                  "supported') }}{% endif %}{% for m in messages %}<start_of_turn>{{ m.content }}"
                  "{% endfor %}"),
      "<bos>", "<eos>", &note);
  EXPECT_EQ(note, "chat template: the model's Jinja template");
  EXPECT_EQ(r.render({{{"user", "Hi"}}}, true), "<start_of_turn>Hi");
  EXPECT_THROW(r.render(kChat, true), jinja::TemplateRaised);
}

}  // namespace
}  // namespace hearth::text
