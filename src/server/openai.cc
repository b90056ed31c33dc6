#include "server/openai.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace hearth::server {
namespace {

using nlohmann::json;

// Generated text may end inside a UTF-8 character or hold bytes that are not UTF-8 at all (a
// byte-level vocabulary); replace those rather than fail the whole response.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

[[noreturn]] void bad(const std::string& message) { throw ApiError(400, message); }

json parse_object(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("the body is not valid JSON");
  if (!j.is_object()) bad("the body must be a JSON object");
  return j;
}

// The field when present and not null, checked by `is`; nullptr when absent or null.
const json* field(const json& j, const char* name, bool (json::*is)() const, const char* what) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return nullptr;
  if (!((*it).*is)()) bad(std::string("'") + name + "' must be " + what);
  return &*it;
}

double number_in(const json& j, const char* name, double lo, double hi, double fallback) {
  const json* v = field(j, name, &json::is_number, "a number");
  if (!v) return fallback;
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(std::string("'") + name + "' must be between " + dump(lo) + " and " + dump(hi));
  }
  return x;
}

int64_t integer_in(const json& j, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const json* v = field(j, name, &json::is_number_integer, "an integer");
  if (!v) return fallback;
  // A huge unsigned value does not fit int64: reject it as out of range, not as a wrap-around.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    bad(std::string("'") + name + "' is out of range");
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) bad(std::string("'") + name + "' is out of range");
  return x;
}

// OpenAI content: a string, or an array of parts of which only {"type":"text"} is understood.
std::string message_content(const json& m, size_t i) {
  const auto it = m.find("content");
  const std::string where = "messages[" + std::to_string(i) + "].content";
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) bad("'" + where + "' must be a string or an array of text parts");
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      bad("'" + where + "' may hold only {\"type\": \"text\", \"text\": ...} parts");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<text::ChatMessage> parse_messages(const json& j) {
  const json* v = field(j, "messages", &json::is_array, "an array of messages");
  if (!v) bad("'messages' is required");
  if (v->empty()) bad("'messages' must not be empty");
  std::vector<text::ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object()) bad("messages[" + std::to_string(i) + "] must be an object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      bad("messages[" + std::to_string(i) + "].role must be a string");
    }
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant") {
      bad("messages[" + std::to_string(i) + "].role '" + r +
          "' is not supported (system, user or assistant)");
    }
    out.push_back({r, message_content(m, i)});
  }
  return out;
}

std::string parse_prompt(const json& j) {
  const auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) bad("'prompt' is required");
  if (it->is_string()) return it->get<std::string>();
  // OpenAI also takes a batch of prompts; one is the only batch this server answers.
  if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) return (*it)[0].get<std::string>();
  bad("'prompt' must be a string");
}

std::vector<std::string> parse_stop(const json& j) {
  const auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return {};
  if (it->is_string()) return {it->get<std::string>()};
  if (!it->is_array() || it->size() > 16) bad("'stop' must be a string or an array of up to 16 strings");
  std::vector<std::string> out;
  for (const json& s : *it) {
    if (!s.is_string()) bad("'stop' must be a string or an array of up to 16 strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

json base_object(const CompletionInfo& info) {
  const bool chat = info.endpoint == Endpoint::Chat;
  return {{"id", info.id}, {"created", info.created}, {"model", info.model},
          {"object", chat ? "chat.completion" : "text_completion"}};
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json chunk(const CompletionInfo& info, json delta_or_text, const json& finish_reason) {
  json c = base_object(info);
  json choice = {{"index", 0}, {"finish_reason", finish_reason}};
  if (info.endpoint == Endpoint::Chat) {
    c["object"] = "chat.completion.chunk";
    choice["delta"] = std::move(delta_or_text);
  } else {
    choice["text"] = std::move(delta_or_text);
  }
  c["choices"] = json::array({choice});
  return c;
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

std::string error_body(int status, std::string_view message, std::string_view type) {
  return dump({{"error", {{"message", std::string(message)}, {"type", std::string(type)}, {"code", status}}}});
}

std::string default_error_body(int status, std::string_view message) {
  std::string_view fallback = "the server could not answer the request";
  std::string_view type = "invalid_request_error";
  switch (status) {
    case 400: fallback = "malformed request"; break;
    case 401: fallback = "invalid or missing API key"; type = "authentication_error"; break;
    case 403: fallback = "forbidden"; type = "permission_error"; break;
    case 404: fallback = "no such endpoint"; type = "not_found_error"; break;
    case 405: fallback = "method not allowed"; break;
    case 408: fallback = "the request did not arrive in time"; break;
    case 413: fallback = "the request body is too large"; break;
    case 431: fallback = "the request headers are too large"; break;
    case 503: fallback = "the server is busy; retry later"; type = "unavailable_error"; break;
    default: type = "server_error";
  }
  return error_body(status, message.empty() ? fallback : message, type);
}

namespace {

// OpenAI's log-probability fields: -1 for none, else how many alternatives per token.
int32_t parse_logprobs(const json& j, Endpoint endpoint) {
  constexpr int64_t kMaxTop = 20;
  if (endpoint == Endpoint::Completion) {
    return static_cast<int32_t>(integer_in(j, "logprobs", 0, kMaxTop, -1));
  }
  const json* on = field(j, "logprobs", &json::is_boolean, "a boolean");
  const int64_t top = integer_in(j, "top_logprobs", 0, kMaxTop, -1);
  if (top >= 0 && !(on && on->get<bool>())) bad("'top_logprobs' needs 'logprobs': true");
  if (!on || !on->get<bool>()) return -1;
  return static_cast<int32_t>(std::max<int64_t>(top, 0));
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint) {
  const json j = parse_object(body);
  CompletionRequest r;
  r.endpoint = endpoint;
  if (endpoint == Endpoint::Chat) {
    r.messages = parse_messages(j);
  } else {
    r.prompt = parse_prompt(j);
  }
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  const int64_t max_new = integer_in(j, "max_completion_tokens", 1, kMaxInt, -1);
  r.max_tokens = static_cast<int32_t>(integer_in(j, "max_tokens", 1, kMaxInt, max_new));
  if (integer_in(j, "n", 1, kMaxInt, 1) != 1) bad("'n' must be 1: one choice per request");
  // OpenAI's sampling is temperature and nucleus only; llama.cpp's extensions are accepted too.
  SamplerParams& s = r.sampling;
  s.temp = static_cast<float>(number_in(j, "temperature", 0.0, 2.0, 1.0));
  s.top_p = static_cast<float>(number_in(j, "top_p", 1e-6, 1.0, 1.0));
  s.top_k = static_cast<int32_t>(integer_in(j, "top_k", 0, kMaxInt, 0));
  s.min_p = static_cast<float>(number_in(j, "min_p", 0.0, 1.0, 0.0));
  s.repeat_penalty = static_cast<float>(number_in(j, "repeat_penalty", 1e-3, 100.0, 1.0));
  if (const json* seed = field(j, "seed", &json::is_number_integer, "an integer")) {
    r.has_seed = true;
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  r.stop = parse_stop(j);
  if (const json* stream = field(j, "stream", &json::is_boolean, "a boolean")) {
    r.stream = stream->get<bool>();
  }
  if (const json* ignore = field(j, "ignore_eos", &json::is_boolean, "a boolean")) {
    r.ignore_eos = ignore->get<bool>();
  }
  r.logprobs = parse_logprobs(j, endpoint);
  return r;
}

std::string parse_tokenize_request(std::string_view body) {
  const json j = parse_object(body);
  const json* v = field(j, "content", &json::is_string, "a string");
  if (!v) bad("'content' is required");
  return v->get<std::string>();
}

std::string parse_apply_template_request(std::string_view body) {
  const json j = parse_object(body);
  const json* v = field(j, "messages", &json::is_array, "an array of messages");
  if (!v) bad("'messages' is required");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      bad("messages[" + std::to_string(i) + "] must be an object with a string 'role'");
    }
  }
  // The body as sent: the renderer reads it again keeping each object's key order, which a
  // template's tojson shows.
  return std::string(body);
}

std::string format_prompt(std::string_view prompt) { return dump({{"prompt", std::string(prompt)}}); }

std::vector<int32_t> parse_detokenize_request(std::string_view body) {
  const json j = parse_object(body);
  const json* v = field(j, "tokens", &json::is_array, "an array of token ids");
  if (!v) bad("'tokens' is required");
  std::vector<int32_t> out;
  for (const json& t : *v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      bad("'tokens' must hold non-negative integer token ids");
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

std::string format_tokens(const std::vector<int32_t>& tokens) { return dump({{"tokens", tokens}}); }

std::string format_content(std::string_view content) {
  return dump({{"content", std::string(content)}});
}

namespace {

json utf8_bytes(const std::string& s) {
  json b = json::array();
  for (const char c : s) b.push_back(static_cast<unsigned char>(c));
  return b;
}

// Chat's form: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
json chat_logprobs(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    json top = json::array();
    for (const auto& [token, lp] : e.top) {
      top.push_back({{"token", token}, {"logprob", lp}, {"bytes", utf8_bytes(token)}});
    }
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", utf8_bytes(e.token)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// The legacy completions' form: parallel arrays, text_offset counting bytes of the reply from
// `offset`, the first entry's.
json completion_logprobs(const std::vector<LogprobEntry>& entries, size_t offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [token, lp] : e.top) top[token] = lp;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += e.token.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json logprobs_json(Endpoint endpoint, const std::vector<LogprobEntry>& entries, size_t offset) {
  return endpoint == Endpoint::Chat ? chat_logprobs(entries) : completion_logprobs(entries, offset);
}

// A chunk with the log-probabilities of its tokens, when the request asked.
std::string with_logprobs(const CompletionInfo& info, json c, const LogprobChunk& lp) {
  if (lp.entries) {
    c["choices"][0]["logprobs"] = logprobs_json(info.endpoint, *lp.entries, lp.text_offset);
  }
  return sse(c);
}

}  // namespace

std::string format_response(const CompletionInfo& info, std::string_view text,
                            std::string_view finish_reason, const Usage& usage,
                            const std::vector<LogprobEntry>* logprobs) {
  json r = base_object(info);
  json choice = {
      {"index", 0}, {"finish_reason", std::string(finish_reason)}, {"logprobs", nullptr}};
  if (logprobs) choice["logprobs"] = logprobs_json(info.endpoint, *logprobs, 0);
  if (info.endpoint == Endpoint::Chat) {
    choice["message"] = {{"role", "assistant"}, {"content", std::string(text)}};
  } else {
    choice["text"] = std::string(text);
  }
  r["choices"] = json::array({choice});
  r["usage"] = usage_json(usage);
  return dump(r);
}

std::string format_role_chunk(const CompletionInfo& info) {
  return sse(chunk(info, {{"role", "assistant"}, {"content", ""}}, nullptr));
}

std::string format_text_chunk(const CompletionInfo& info, std::string_view text,
                              const LogprobChunk& lp) {
  json delta = info.endpoint == Endpoint::Chat ? json{{"content", std::string(text)}}
                                               : json(std::string(text));
  return with_logprobs(info, chunk(info, std::move(delta), nullptr), lp);
}

std::string format_final_chunk(const CompletionInfo& info, std::string_view finish_reason,
                               const Usage& usage, const LogprobChunk& lp) {
  json c = chunk(info, info.endpoint == Endpoint::Chat ? json::object() : json(""),
                 std::string(finish_reason));
  c["usage"] = usage_json(usage);
  return with_logprobs(info, std::move(c), lp);
}

std::string format_models(std::string_view model_id, int64_t created) {
  json m = {{"id", std::string(model_id)}, {"object", "model"}, {"created", created}, {"owned_by", "hearth"}};
  return dump({{"object", "list"}, {"data", json::array({m})}});
}

}  // namespace hearth::server
