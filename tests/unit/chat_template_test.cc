// Chat templates: each family recognised from a representative Jinja template (as published with
// the models), rendered exactly, with the default when a template is missing or unknown; and the
// stop-string matcher that streaming generation relies on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "text/chat_template.h"
#include "text/stop_strings.h"

namespace hearth::text {
namespace {

// Shortened from the templates the models ship in tokenizer.chat_template.
const char* kChatMlJinja =  // Qwen2 / OpenHermes
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";
const char* kLlama3Jinja =  // Meta-Llama-3-8B-Instruct
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
    "<|end_header_id|>\\n\\n' }}{% endif %}";
const char* kLlama2Jinja =  // Llama-2-7b-chat-hf
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 "
    "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}"
    "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' "
    "[/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}";
const char* kMistralJinja =  // Mistral-7B-Instruct-v0.1
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}";
const char* kZephyrJinja =  // zephyr-7b-beta
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' "
    "+ message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ "
    "'<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and "
    "add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
const char* kFalconJinja =  // Falcon-180B-chat style
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ 'System: ' + "
    "message['content'] + '\\n' }}{% elif message['role'] == 'user' %}{{ 'User: ' + "
    "message['content'] + '\\n' }}{% else %}{{ 'Falcon: ' + message['content'] + '\\n' }}{% endif "
    "%}{% endfor %}{% if add_generation_prompt %}{{ 'Falcon:' }}{% endif %}";
// Families Hearth does not render: they must fall back, not be mistaken for a known one.
const char* kPhi3Jinja =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + "
    "'<|end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";
const char* kGemmaJinja =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
    "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{'<start_of_turn>model\\n'}}{% endif %}";

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello! How can I help?"},
    {"user", "Tell me a joke."},
};

struct Case {
  ChatFamily family;
  const char* jinja;
  std::string without_prompt;  // render_chat(..., false)
  std::string prompt;          // what add_generation_prompt appends
};

std::vector<Case> cases() {
  return {
      {ChatFamily::ChatMl, kChatMlJinja,
       "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
       "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
       "<|im_start|>user\nTell me a joke.<|im_end|>\n",
       "<|im_start|>assistant\n"},
      {ChatFamily::Llama3, kLlama3Jinja,
       "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>",
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {ChatFamily::Llama2, kLlama2Jinja,
       "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello! How can I help? </s>"
       "<s>[INST] Tell me a joke. [/INST]",
       ""},
      {ChatFamily::Mistral, kMistralJinja,
       "[INST] You are terse.\n\nHi [/INST]Hello! How can I help?</s>[INST] Tell me a joke. [/INST]",
       ""},
      {ChatFamily::Zephyr, kZephyrJinja,
       "<|system|>\nYou are terse.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello! How can I help?</s>\n"
       "<|user|>\nTell me a joke.</s>\n",
       "<|assistant|>\n"},
      {ChatFamily::Falcon, kFalconJinja,
       "System: You are terse.\nUser: Hi\nFalcon: Hello! How can I help?\nUser: Tell me a joke.\n",
       "Falcon:"},
  };
}

TEST(ChatTemplate, DetectsEachFamily) {
  for (const Case& c : cases()) {
    bool recognised = false;
    EXPECT_EQ(detect_chat_family(c.jinja, &recognised), c.family) << to_string(c.family);
    EXPECT_TRUE(recognised) << to_string(c.family);
  }
}

TEST(ChatTemplate, FallsBackToChatMlWhenMissingOrUnknown) {
  for (const char* jinja : {"", kPhi3Jinja, kGemmaJinja, "{{ messages }}"}) {
    bool recognised = true;
    EXPECT_EQ(detect_chat_family(jinja, &recognised), ChatFamily::ChatMl) << jinja;
    EXPECT_FALSE(recognised) << jinja;
  }
  EXPECT_EQ(kDefaultChatFamily, ChatFamily::ChatMl);
  EXPECT_EQ(detect_chat_family(""), ChatFamily::ChatMl);  // the flag pointer is optional
}

TEST(ChatTemplate, RendersEachFamilyExactly) {
  for (const Case& c : cases()) {
    EXPECT_EQ(render_chat(c.family, kConversation, false), c.without_prompt) << to_string(c.family);
    EXPECT_EQ(render_chat(c.family, kConversation, true), c.without_prompt + c.prompt)
        << to_string(c.family);
  }
}

// The content ranges of render_chat_prompt cover exactly the messages' text (as each family
// trims it) and nothing of the markup, so a server can parse the markup's control tokens alone.
TEST(ChatTemplate, ContentRangesCoverTheMessagesAndNoMarkup) {
  const std::vector<ChatMessage> tricky = {
      {"system", "Be </s> kind."}, {"user", " <|im_end|>hi "}, {"assistant", "ok<|eot_id|>"},
      {"user", "[INST]"}};
  for (const Case& c : cases()) {
    for (const auto& messages : {kConversation, tricky}) {
      const ChatPrompt p = render_chat_prompt(c.family, messages, true);
      EXPECT_EQ(p.text, render_chat(c.family, messages, true)) << to_string(c.family);
      std::string covered;
      size_t last_end = 0;
      for (const auto& [b, e] : p.content) {
        EXPECT_LT(b, e);
        EXPECT_GE(b, last_end) << "ranges must ascend without overlap";
        last_end = e;
        covered += p.text.substr(b, e - b);
      }
      // Every message's text, trimmed or not, appears in order in what the ranges cover, and
      // the ranges cover nothing else (the Mistral/Llama-2 system text joins the user turn
      // through markup, so compare without whitespace).
      std::string expected;
      for (const ChatMessage& m : messages) expected += m.content;
      const auto squeeze = [](std::string s) {
        std::erase_if(s, [](char ch) { return ch == ' ' || ch == '\n'; });
        return s;
      };
      EXPECT_EQ(squeeze(covered), squeeze(expected)) << to_string(c.family);
    }
  }
  // ChatML exactly: the content ranges are the two texts between the markers.
  const std::vector<ChatMessage> one = {{"user", "a</s>"}};
  const ChatPrompt p = render_chat_prompt(ChatFamily::ChatMl, one, true);
  ASSERT_EQ(p.content.size(), 1u);
  EXPECT_EQ(p.text.substr(p.content[0].first, p.content[0].second - p.content[0].first), "a</s>");
}

TEST(ChatTemplate, FoldsSystemIntoTheNextUserTurnWhereThereIsNoSystemRole) {
  const std::vector<ChatMessage> only_system = {{"system", "Be kind."}};
  EXPECT_EQ(render_chat(ChatFamily::Llama2, only_system, true),
            "[INST] <<SYS>>\nBe kind.\n<</SYS>> [/INST]");
  EXPECT_EQ(render_chat(ChatFamily::Mistral, only_system, true), "[INST] Be kind.\n\n [/INST]");
  const std::vector<ChatMessage> no_system = {{"user", "Hi"}, {"assistant", "Yo"}, {"user", "Ok"}};
  EXPECT_EQ(render_chat(ChatFamily::Llama2, no_system, true),
            "[INST] Hi [/INST] Yo </s><s>[INST] Ok [/INST]");
}

TEST(ChatTemplate, TrimsContentWhereTheTemplateDoes) {
  const std::vector<ChatMessage> padded = {{"user", "  Hi \n"}};
  EXPECT_EQ(render_chat(ChatFamily::Llama3, padded, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(render_chat(ChatFamily::Llama2, padded, false), "[INST] Hi [/INST]");
  EXPECT_EQ(render_chat(ChatFamily::ChatMl, padded, false),
            "<|im_start|>user\n  Hi \n<|im_end|>\n");
}

// The chat CLI keeps the KV cache across turns only when the next turn's rendering starts with the
// previous prompt followed by the reply as the model wrote it (SentencePiece models write a leading
// space after "[/INST]" or "Falcon:", which those templates' trimming then restores).
TEST(ChatTemplate, NextTurnExtendsPromptPlusReply) {
  for (const Case& c : cases()) {
    const bool spaced = c.family == ChatFamily::Llama2 || c.family == ChatFamily::Falcon;
    const std::string reply = spaced ? " Sure." : "Sure.";
    std::vector<ChatMessage> messages(kConversation.begin(), kConversation.end());
    const std::string prompt = render_chat(c.family, messages, true);
    messages.push_back({"assistant", reply});
    messages.push_back({"user", "Again."});
    const std::string next = render_chat(c.family, messages, true);
    EXPECT_TRUE(next.starts_with(prompt + reply)) << to_string(c.family) << ":\n" << next;
  }
}

TEST(ChatTemplate, RejectsUnknownRoles) {
  const std::vector<ChatMessage> bad = {{"user", "Hi"}, {"tool", "42"}};
  for (const Case& c : cases()) {
    try {
      render_chat(c.family, bad, true);
      ADD_FAILURE() << to_string(c.family) << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'tool'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("message 1"), std::string::npos) << e.what();
    }
  }
}

TEST(ChatTemplate, NamesRoundTrip) {
  for (const Case& c : cases()) {
    EXPECT_EQ(parse_chat_family(to_string(c.family)), c.family);
    EXPECT_NE(chat_family_names().find(to_string(c.family)), std::string::npos);
  }
  EXPECT_FALSE(parse_chat_family("vicuna").has_value());
  EXPECT_FALSE(parse_chat_family("").has_value());
}

TEST(ChatTemplate, StopStringsEndEachFamilysTurn) {
  EXPECT_EQ(chat_stop_strings(ChatFamily::ChatMl).front(), "<|im_end|>");
  EXPECT_EQ(chat_stop_strings(ChatFamily::Llama3).front(), "<|eot_id|>");
  EXPECT_EQ(chat_stop_strings(ChatFamily::Llama2).front(), "</s>");
  EXPECT_EQ(chat_stop_strings(ChatFamily::Mistral).front(), "</s>");
  EXPECT_EQ(chat_stop_strings(ChatFamily::Zephyr).front(), "</s>");
  EXPECT_EQ(chat_stop_strings(ChatFamily::Falcon).front(), "\nUser:");
}

TEST(StopStringMatcher, PassesTextWithoutStops) {
  StopStringMatcher m({"<|im_end|>"});
  EXPECT_EQ(m.push("Hello"), "Hello");
  EXPECT_EQ(m.push(" world"), " world");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, HoldsBackAPossibleStartAndCutsAtTheStop) {
  StopStringMatcher m({"<|im_end|>"});
  EXPECT_EQ(m.push("Hi<|im"), "Hi");  // "<|im" may become the stop string
  EXPECT_EQ(m.push("_e"), "");
  EXPECT_EQ(m.push("nd|>trailing"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, ReleasesAFalseStart) {
  StopStringMatcher m({"\nUser:"});
  EXPECT_EQ(m.push("a\nUs"), "a");
  EXPECT_EQ(m.push("ually"), "\nUsually");
  EXPECT_EQ(m.push("\n"), "");
  EXPECT_EQ(m.flush(), "\n");  // generation ended for another reason: the held text is output
  EXPECT_FALSE(m.stopped());
}

TEST(StopStringMatcher, EarliestStopWinsAndEmptyStopsAreIgnored) {
  StopStringMatcher m({"", "</s>", "[INST]"});
  EXPECT_EQ(m.push("x [INST] y </s>"), "x ");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace hearth::text
