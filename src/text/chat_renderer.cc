#include "text/chat_renderer.h"

#include <algorithm>
#include <ctime>

#include "core/error.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace hearth::text {
namespace {

jinja::Value messages_value(std::span<const ChatMessage> messages) {
  std::vector<jinja::Value> list;
  for (const ChatMessage& m : messages) {
    jinja::Dict d;
    d.set("role", jinja::Value(m.role));
    d.set("content", jinja::Value(m.content));
    list.push_back(jinja::Value::dict(std::move(d)));
  }
  return jinja::mark_content(jinja::Value::list(std::move(list)));
}

// For the built-in families: role and content strings only.
std::vector<ChatMessage> plain_messages(const jinja::Value& messages) {
  if (!messages.is_list()) fail("chat messages must be a JSON array");
  std::vector<ChatMessage> out;
  for (const jinja::Value& m : messages.as_list()) {
    const jinja::Value* role = m.is_mapping() ? m.as_dict().find("role") : nullptr;
    const jinja::Value* content = m.is_mapping() ? m.as_dict().find("content") : nullptr;
    if (!role || !role->is_string() || !content || !content->is_string()) {
      fail("chat message ", out.size(), " needs string 'role' and 'content' fields");
    }
    out.push_back({role->as_string(), content->as_string()});
  }
  return out;
}

std::tm local_today() {
  const std::time_t now = std::time(nullptr);
  std::tm t{};
  localtime_r(&now, &t);
  return t;
}

}  // namespace

ChatRenderer::~ChatRenderer() = default;
ChatRenderer::ChatRenderer(ChatRenderer&&) noexcept = default;
ChatRenderer& ChatRenderer::operator=(ChatRenderer&&) noexcept = default;

ChatRenderer ChatRenderer::from_family(ChatFamily family) {
  ChatRenderer r;
  r.family_ = family;
  return r;
}

ChatRenderer ChatRenderer::choose(const std::string& flag, const std::optional<std::string>& jinja,
                                  std::string bos_text, std::string eos_text, std::string* note) {
  if (flag.empty()) return from_model(jinja, std::move(bos_text), std::move(eos_text), note);
  const std::optional<ChatFamily> family = parse_chat_family(flag);
  if (!family) fail("unknown chat template '", flag, "' (known: ", chat_family_names(), ")");
  if (note) *note = "chat template " + flag + " (--chat-template)";
  return from_family(*family);
}

ChatRenderer ChatRenderer::from_model(const std::optional<std::string>& jinja, std::string bos_text,
                                      std::string eos_text, std::string* note) {
  bool recognised = false;
  ChatRenderer r;
  r.family_ = detect_chat_family(jinja.value_or(""), &recognised);
  r.family_recognised_ = recognised;
  r.bos_text_ = std::move(bos_text);
  r.eos_text_ = std::move(eos_text);
  const std::string family_name(to_string(r.family_));
  if (!jinja || jinja->empty()) {
    if (note) *note = "chat template " + family_name + " (the model has none; default)";
    return r;
  }
  try {
    r.jinja_ = std::make_unique<jinja::Template>(*jinja);
    // A trial render finds the constructs Hearth does not support before a user does.
    r.render({{{"system", "You are helpful."}, {"user", "Hi"}}}, true);
    if (note) *note = "chat template: the model's Jinja template";
  } catch (const jinja::TemplateRaised&) {
    // The template refuses a system message (Gemma does): it still renders what it accepts.
    if (note) *note = "chat template: the model's Jinja template";
  } catch (const Error& e) {
    r.jinja_.reset();
    if (note) {
      *note = "warning: the model's chat template cannot be rendered (" + std::string(e.what()) +
              "); using " + family_name + (recognised ? " (by its markers)" : " (default)");
    }
  }
  return r;
}

jinja::Template::Rendered ChatRenderer::render_jinja(const jinja::Value& messages,
                                                     const jinja::Value& tools,
                                                     bool add_generation_prompt) const {
  jinja::Dict vars;
  vars.set("messages", messages);
  if (!tools.is_undefined()) vars.set("tools", tools);
  vars.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  vars.set("bos_token", jinja::Value(bos_text_));
  vars.set("eos_token", jinja::Value(eos_text_));
  return jinja_->render_with_content(jinja::Value::dict(std::move(vars)), local_today());
}

std::string ChatRenderer::render_json(std::string_view messages_json,
                                      bool add_generation_prompt) const {
  jinja::Value messages = jinja::parse_json(messages_json);
  jinja::Value tools;
  if (messages.is_mapping()) {
    const jinja::Dict& request = messages.as_dict();
    if (const jinja::Value* t = request.find("tools")) tools = *t;
    const jinja::Value* inner = request.find("messages");
    if (!inner) fail("chat request: 'messages' is required");
    messages = *inner;
  }
  if (jinja_) return render_jinja(jinja::mark_content(messages), tools, add_generation_prompt).text;
  const std::vector<ChatMessage> plain = plain_messages(messages);
  return render_chat(family_, plain, add_generation_prompt);
}

std::string ChatRenderer::render(std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) const {
  if (jinja_) {
    return render_jinja(messages_value(messages), jinja::Value(), add_generation_prompt).text;
  }
  return render_chat(family_, messages, add_generation_prompt);
}

ChatPrompt ChatRenderer::render_prompt(std::span<const ChatMessage> messages) const {
  if (!jinja_) return render_chat_prompt(family_, messages, true);
  jinja::Template::Rendered r = render_jinja(messages_value(messages), jinja::Value(), true);
  ChatPrompt p;
  size_t cut = 0;
  if (!bos_text_.empty() && r.text.compare(0, bos_text_.size(), bos_text_) == 0) {
    cut = bos_text_.size();
  }
  p.text = r.text.substr(cut);
  for (const auto& [b, e] : r.content) {
    if (e > cut) p.content.emplace_back(std::max(b, cut) - cut, e - cut);
  }
  return p;
}

std::vector<std::string> ChatRenderer::stop_strings() const {
  if (!jinja_) return chat_stop_strings(family_);
  std::vector<std::string> stops;
  if (family_recognised_) stops = chat_stop_strings(family_);
  if (!eos_text_.empty()) stops.push_back(eos_text_);
  return stops;
}

std::string ChatRenderer::description() const {
  return jinja_ ? "the model's Jinja template" : std::string(to_string(family_));
}

}  // namespace hearth::text
