#include "text/chat_template.h"

#include <array>

#include "core/error.h"

namespace hearth::text {
namespace {

struct FamilyName {
  ChatFamily family;
  std::string_view name;
};
constexpr std::array<FamilyName, 6> kNames = {{
    {ChatFamily::ChatMl, "chatml"},
    {ChatFamily::Llama2, "llama2"},
    {ChatFamily::Llama3, "llama3"},
    {ChatFamily::Mistral, "mistral"},
    {ChatFamily::Zephyr, "zephyr"},
    {ChatFamily::Falcon, "falcon"},
}};

bool contains(std::string_view s, std::string_view marker) {
  return s.find(marker) != std::string_view::npos;
}

// Python's str.strip() on ASCII whitespace: the Jinja templates that trim content use it.
std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

enum class Role { System, User, Assistant };

Role parse_role(const ChatMessage& m, size_t index) {
  if (m.role == "system") return Role::System;
  if (m.role == "user") return Role::User;
  if (m.role == "assistant") return Role::Assistant;
  fail("chat message ", index, " has role '", m.role,
       "'; the roles are system, user and assistant");
}

// Families that mark each message by its role name and need no state between messages.
std::string render_tagged(ChatFamily family, std::span<const ChatMessage> messages,
                          bool add_generation_prompt) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const Role role = parse_role(m, i);
    switch (family) {
      case ChatFamily::ChatMl:
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        break;
      case ChatFamily::Llama3:
        // Meta's template trims every message.
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += trim(m.content);
        out += "<|eot_id|>";
        break;
      case ChatFamily::Zephyr:
        out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
        break;
      default: {  // Falcon
        static constexpr std::string_view kLabel[] = {"System: ", "User: ", "Falcon: "};
        out += kLabel[static_cast<int>(role)];
        out += trim(m.content);
        out += "\n";
      }
    }
  }
  if (add_generation_prompt) {
    switch (family) {
      case ChatFamily::ChatMl: out += "<|im_start|>assistant\n"; break;
      case ChatFamily::Llama3: out += "<|start_header_id|>assistant<|end_header_id|>\n\n"; break;
      case ChatFamily::Zephyr: out += "<|assistant|>\n"; break;
      default: out += "Falcon:";
    }
  }
  return out;
}

// Llama-2 and Mistral: [INST] blocks with no system role, so system text is held and folded into
// the next user message (Llama-2 inside <<SYS>>, Mistral as a leading paragraph). A system message
// with no user message after it still gets a block of its own rather than being lost.
std::string render_inst(ChatFamily family, std::span<const ChatMessage> messages) {
  const bool llama2 = family == ChatFamily::Llama2;
  std::string out, system;
  auto user_turn = [&](std::string_view content) {
    std::string text;
    if (!system.empty()) {
      text = llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" : system + "\n\n";
    }
    text += content;
    system.clear();
    // Llama-2 opens every turn with BOS (not the first: see the BOS contract) and strips the
    // text; Mistral v0.1 does neither.
    if (llama2) {
      if (!out.empty()) out += "<s>";
      out += "[INST] ";
      out += trim(text);
    } else {
      out += "[INST] " + text;
    }
    out += " [/INST]";
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    switch (parse_role(m, i)) {
      case Role::System:
        if (!system.empty()) system += "\n\n";
        system += m.content;
        break;
      case Role::User:
        user_turn(m.content);
        break;
      case Role::Assistant:
        if (llama2) {
          out += " ";
          out += trim(m.content);
          out += " </s>";
        } else {
          out += m.content + "</s>";
        }
    }
  }
  if (!system.empty()) user_turn("");
  return out;
}

}  // namespace

ChatFamily detect_chat_family(std::string_view t, bool* recognised) {
  // Most specific markers first: Llama-2 and Mistral templates share [INST]; Phi-3's template has
  // Zephyr's <|user|> but ends turns with <|end|>, which Zephyr rendering would get wrong.
  std::optional<ChatFamily> family;
  if (contains(t, "<|im_start|>")) {
    family = ChatFamily::ChatMl;
  } else if (contains(t, "<|start_header_id|>")) {
    family = ChatFamily::Llama3;
  } else if (contains(t, "[INST]")) {
    family = contains(t, "<<SYS>>") ? ChatFamily::Llama2 : ChatFamily::Mistral;
  } else if (contains(t, "<|user|>") && !contains(t, "<|end|>")) {
    family = ChatFamily::Zephyr;
  } else if (contains(t, "Falcon")) {
    family = ChatFamily::Falcon;
  }
  if (recognised) *recognised = family.has_value();
  return family.value_or(kDefaultChatFamily);
}

std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages,
                        bool add_generation_prompt) {
  if (family == ChatFamily::Llama2 || family == ChatFamily::Mistral) {
    return render_inst(family, messages);
  }
  return render_tagged(family, messages, add_generation_prompt);
}

std::vector<std::string> chat_stop_strings(ChatFamily family) {
  switch (family) {
    case ChatFamily::ChatMl: return {"<|im_end|>", "<|im_start|>"};
    case ChatFamily::Llama3: return {"<|eot_id|>", "<|start_header_id|>", "<|end_of_text|>"};
    case ChatFamily::Llama2:
    case ChatFamily::Mistral: return {"</s>", "[INST]"};
    case ChatFamily::Zephyr: return {"</s>", "<|user|>"};
    case ChatFamily::Falcon: return {"\nUser:", "<|endoftext|>"};
  }
  return {};
}

std::string_view to_string(ChatFamily family) {
  for (const FamilyName& n : kNames) {
    if (n.family == family) return n.name;
  }
  return "?";
}

std::optional<ChatFamily> parse_chat_family(std::string_view name) {
  for (const FamilyName& n : kNames) {
    if (n.name == name) return n.family;
  }
  return std::nullopt;
}

std::string chat_family_names() {
  std::string out;
  for (const FamilyName& n : kNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

}  // namespace hearth::text
