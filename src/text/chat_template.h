// The built-in chat template families: a conversation (system/user/assistant messages) rendered
// into the prompt text a chat model was trained on, by our own code, for `--chat-template NAME`
// and as the fallback when a file's Jinja template (tokenizer.chat_template, rendered by
// ChatRenderer in chat_renderer.h) cannot be rendered; the family is then recognised by markers
// in that template, as llama.cpp's built-in templates are.
//
// BOS contract: the rendered text never starts with the BOS token's text (no leading "<s>" or
// "<|begin_of_text|>", although the Jinja templates write one). Tokenize it with
// add_bos = Model::add_bos_default() and parse_special = true, so that BOS comes from the
// vocabulary's own rule (no doubled BOS when a template and the tokenizer both add one) and the
// family's control tokens written in the text ("<|im_end|>", "</s>") become those tokens. BOS
// texts inside the conversation (Llama-2's "</s><s>[INST]" between turns) are kept.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::text {

enum class ChatFamily { ChatMl, Llama2, Llama3, Mistral, Zephyr, Falcon };

// What llama.cpp also falls back to when a model has no template or one it does not know.
inline constexpr ChatFamily kDefaultChatFamily = ChatFamily::ChatMl;

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The family a Jinja template belongs to, by its markers. When none matches (an empty template, or
// one of a family Hearth does not render), returns kDefaultChatFamily and sets *recognised to
// false, so a frontend can say that it fell back.
ChatFamily detect_chat_family(std::string_view jinja_template, bool* recognised = nullptr);

// The prompt text of `messages`, then the opening of the assistant's next turn when
// add_generation_prompt is set (families whose user turn already ends in the cue, Llama-2 and
// Mistral, add nothing). Throws hearth::Error on a role other than system, user or assistant.
// Families that know no system role (Mistral, Llama-2) fold system text into the next user message.
std::string render_chat(ChatFamily family, std::span<const ChatMessage> messages,
                        bool add_generation_prompt);

// A byte range [first, second) of a text.
using TextRange = std::pair<size_t, size_t>;

// A rendered conversation and where the messages' own text lies in it: the rest is the family's
// markup. A server tokenizes the markup's control tokens as such and the content as plain text
// (a user who types "</s>" or "<|im_end|>" gets those characters, not the tokens).
struct ChatPrompt {
  std::string text;                 // render_chat's text, the same bytes
  std::vector<TextRange> content;   // ascending, disjoint, none empty
};
ChatPrompt render_chat_prompt(ChatFamily family, std::span<const ChatMessage> messages,
                              bool add_generation_prompt);

// Texts that end an assistant turn when the model writes them as plain text (for example when its
// vocabulary lacks the control token, or a base model imitates the next user turn). End-of-
// generation tokens are caught by id (Model::is_eog); these catch the same ends as text.
std::vector<std::string> chat_stop_strings(ChatFamily family);

// "chatml", "llama2", "llama3", "mistral", "zephyr", "falcon".
std::string_view to_string(ChatFamily family);
// Inverse of to_string (lower case); nullopt for an unknown name.
std::optional<ChatFamily> parse_chat_family(std::string_view name);
// The accepted names, comma-separated, for help texts and error messages.
std::string chat_family_names();

}  // namespace hearth::text
