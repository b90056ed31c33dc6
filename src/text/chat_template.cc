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

// The rendered text as it is built: markup, and content whose ranges are remembered.
class Builder {
 public:
  explicit Builder(ChatPrompt& out) : out_(out) {}
  void markup(std::string_view s) { out_.text += s; }
  void content(std::string_view s) {
    if (s.empty()) return;
    const size_t at = out_.text.size();
    out_.text += s;
    if (!out_.content.empty() && out_.content.back().second == at) {
      out_.content.back().second = out_.text.size();
    } else {
      out_.content.push_back({at, out_.text.size()});
    }
  }
  bool empty() const { return out_.text.empty(); }

 private:
  ChatPrompt& out_;
};

// Text made of markup and content pieces that is trimmed as a whole (Llama-2's user turn) before
// it goes into the Builder.
struct Pieces {
  std::vector<std::pair<std::string, bool>> parts;  // text, is content
  void markup(std::string_view s) { parts.emplace_back(std::string(s), false); }
  void content(std::string_view s) { parts.emplace_back(std::string(s), true); }
  // Python's str.strip() over the concatenation.
  void trim() {
    constexpr std::string_view ws = " \t\n\r\f\v";
    for (auto& [text, is_content] : parts) {
      const size_t b = text.find_first_not_of(ws);
      text.erase(0, b == std::string::npos ? text.size() : b);
      if (!text.empty()) break;
    }
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      const size_t e = it->first.find_last_not_of(ws);
      it->first.erase(e == std::string::npos ? 0 : e + 1);
      if (!it->first.empty()) break;
    }
  }
  void into(Builder& b) const {
    for (const auto& [text, is_content] : parts) {
      if (is_content) {
        b.content(text);
      } else {
        b.markup(text);
      }
    }
  }
};

// Families that mark each message by its role name and need no state between messages.
void render_tagged(ChatFamily family, std::span<const ChatMessage> messages,
                   bool add_generation_prompt, Builder& out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const Role role = parse_role(m, i);
    switch (family) {
      case ChatFamily::ChatMl:
        out.markup("<|im_start|>" + m.role + "\n");
        out.content(m.content);
        out.markup("<|im_end|>\n");
        break;
      case ChatFamily::Llama3:
        // Meta's template trims every message.
        out.markup("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
        out.content(trim(m.content));
        out.markup("<|eot_id|>");
        break;
      case ChatFamily::Zephyr:
        out.markup("<|" + m.role + "|>\n");
        out.content(m.content);
        out.markup("</s>\n");
        break;
      default: {  // Falcon
        static constexpr std::string_view kLabel[] = {"System: ", "User: ", "Falcon: "};
        out.markup(kLabel[static_cast<int>(role)]);
        out.content(trim(m.content));
        out.markup("\n");
      }
    }
  }
  if (add_generation_prompt) {
    switch (family) {
      case ChatFamily::ChatMl: out.markup("<|im_start|>assistant\n"); break;
      case ChatFamily::Llama3: out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
      case ChatFamily::Zephyr: out.markup("<|assistant|>\n"); break;
      default: out.markup("Falcon:");
    }
  }
}

// Llama-2 and Mistral: [INST] blocks with no system role, so system text is held and folded into
// the next user message (Llama-2 inside <<SYS>>, Mistral as a leading paragraph). A system message
// with no user message after it still gets a block of its own rather than being lost.
void render_inst(ChatFamily family, std::span<const ChatMessage> messages, Builder& out) {
  const bool llama2 = family == ChatFamily::Llama2;
  std::string system;
  auto user_turn = [&](std::string_view content) {
    Pieces text;
    if (!system.empty()) {
      if (llama2) text.markup("<<SYS>>\n");
      text.content(system);
      text.markup(llama2 ? "\n<</SYS>>\n\n" : "\n\n");
    }
    text.content(content);
    system.clear();
    // Llama-2 opens every turn with BOS (not the first: see the BOS contract) and strips the
    // text; Mistral v0.1 does neither.
    if (llama2) {
      if (!out.empty()) out.markup("<s>");
      out.markup("[INST] ");
      text.trim();
    } else {
      out.markup("[INST] ");
    }
    text.into(out);
    out.markup(" [/INST]");
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
          out.markup(" ");
          out.content(trim(m.content));
          out.markup(" </s>");
        } else {
          out.content(m.content);
          out.markup("</s>");
        }
    }
  }
  if (!system.empty()) user_turn("");
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

ChatPrompt render_chat_prompt(ChatFamily family, std::span<const ChatMessage> messages,
                              bool add_generation_prompt) {
  ChatPrompt prompt;
  Builder out(prompt);
  if (family == ChatFamily::Llama2 || family == ChatFamily::Mistral) {
    render_inst(family, messages, out);
  } else {
    render_tagged(family, messages, add_generation_prompt, out);
  }
  return prompt;
}

std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages,
                        bool add_generation_prompt) {
  return render_chat_prompt(family, messages, add_generation_prompt).text;
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
