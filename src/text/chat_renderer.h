// A model's chat template, ready to render conversations: the file's own Jinja template when
// Hearth can render it, else one of the built-in families (chat_template.h), chosen by name or by
// the markers in the file's template.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_template.h"
#include "text/jinja/template.h"

namespace hearth::text {

class ChatRenderer {
 public:
  // The file's template (`jinja`, absent or empty when the file has none) rendered with the
  // vocabulary's BOS and EOS texts. A template that does not parse, or fails on a plain
  // system + user conversation, falls back to the family its markers name; `note` then says so
  // (and otherwise which template is used), for the frontend to print.
  static ChatRenderer from_model(const std::optional<std::string>& jinja, std::string bos_text,
                                 std::string eos_text, std::string* note);
  // A built-in family (`--chat-template NAME`).
  static ChatRenderer from_family(ChatFamily family);
  // What a frontend uses: the family `flag` names when it is not empty (Error listing the names
  // when it is unknown), else from_model. `note` says which template and why.
  static ChatRenderer choose(const std::string& flag, const std::optional<std::string>& jinja,
                             std::string bos_text, std::string eos_text, std::string* note);
  ~ChatRenderer();
  ChatRenderer(ChatRenderer&&) noexcept;
  ChatRenderer& operator=(ChatRenderer&&) noexcept;

  // The template's full text for the conversation. `messages_json` is a JSON array of message
  // objects, or an object whose "messages" field is one (and whose "tools", if any, the template
  // gets as `tools`); fields beyond role and content (such as tool_calls) reach the template as
  // they are, keys in the order written.
  // jinja::TemplateRaised when the template refuses the conversation (its raise_exception), Error
  // on malformed JSON or a conversation the template cannot render.
  std::string render_json(std::string_view messages_json, bool add_generation_prompt) const;
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  // render() with the generation prompt, without the BOS text the template may write first, and
  // where the messages' own text lies in it: the prompt to tokenize with add_bos =
  // Model::add_bos_default(), the markup's control tokens parsed and the content left text (the
  // BOS contract of chat_template.h).
  ChatPrompt render_prompt(std::span<const ChatMessage> messages) const;

  // Texts that end an assistant turn: the family's; for a Jinja template, the EOS text and those
  // of the family its markers name, if any.
  std::vector<std::string> stop_strings() const;
  // "the model's Jinja template" or the family name.
  std::string description() const;

 private:
  ChatRenderer() = default;
  // `tools` undefined: the template sees none.
  jinja::Template::Rendered render_jinja(const jinja::Value& messages, const jinja::Value& tools,
                                         bool add_generation_prompt) const;

  std::unique_ptr<jinja::Template> jinja_;  // null: render with family_
  ChatFamily family_ = kDefaultChatFamily;
  bool family_recognised_ = true;  // false: no marker named family_ (it is only the default)
  std::string bos_text_;
  std::string eos_text_;
};

}  // namespace hearth::text
