// The OpenAI API's request and response shapes as pure functions: a JSON body in, a validated
// request out (or an ApiError with the HTTP status to answer), and results out as JSON text. No
// model or network here, so every rule is unit-tested directly.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hearth/sampling.h"
#include "text/chat_template.h"

namespace hearth::server {

// A request the server refuses; `status` is the HTTP status, the message goes to the client.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message,
           std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), type(std::move(type)) {}
  int status;
  std::string type;
};

// {"error": {"message": ..., "type": ..., "code": status}}
std::string error_body(int status, std::string_view message,
                       std::string_view type = "invalid_request_error");
// error_body for a status the HTTP layer answers without a handler (400, 403, 404, 408, 413,
// 431, 503...): `message`, or the status's usual meaning when it is empty, and the type that
// status has.
std::string default_error_body(int status, std::string_view message = {});

enum class Endpoint { Chat, Completion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Completion;
  std::vector<text::ChatMessage> messages;  // Chat
  std::string prompt;                       // Completion
  int32_t max_tokens = -1;                  // -1: until an end token or a full context
  SamplerParams sampling;
  bool has_seed = false;  // otherwise the server draws one
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;  // llama.cpp's extension: generate past end-of-generation tokens
  // -1: no log-probabilities; else each token's and this many alternatives (completions'
  // "logprobs": N; chat's "logprobs": true with "top_logprobs": N).
  int32_t logprobs = -1;
};

// Parses and validates a /v1/chat/completions or /v1/completions body. Unknown fields are
// ignored, as OpenAI does. Throws ApiError (400) naming the offending field.
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint);

// /tokenize {"content": "..."} and /detokenize {"tokens": [...]}; ApiError (400) otherwise.
std::string parse_tokenize_request(std::string_view body);
std::vector<int32_t> parse_detokenize_request(std::string_view body);
std::string format_tokens(const std::vector<int32_t>& tokens);
std::string format_content(std::string_view content);

// /apply-template {"messages": [...], "tools": [...] (optional)}: checks that each message is an object with a string role
// (ApiError 400 otherwise) and returns the body for ChatRenderer::render_json. The answer is
// {"prompt": "..."}.
std::string parse_apply_template_request(std::string_view body);
std::string format_prompt(std::string_view prompt);

// What one finished (or streaming) completion reports.
struct CompletionInfo {
  Endpoint endpoint = Endpoint::Completion;
  std::string id;     // "chatcmpl-..." or "cmpl-..."
  std::string model;  // the model's name as /v1/models lists it
  int64_t created = 0;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

// A generated token's text and log-probability, with the most likely alternatives.
struct LogprobEntry {
  std::string token;
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // most likely first
};

// The non-streaming response body; finish_reason is "stop" or "length". With logprobs (one per
// generated token) the choice carries them in the endpoint's OpenAI form, else "logprobs": null.
std::string format_response(const CompletionInfo& info, std::string_view text,
                            std::string_view finish_reason, const Usage& usage,
                            const std::vector<LogprobEntry>* logprobs = nullptr);

// The log-probabilities one chunk of a stream carries (entries null: none asked): the tokens
// generated since the previous chunk, whose text may still be held back, and the byte offset of
// the first in the reply (completions' text_offset).
struct LogprobChunk {
  const std::vector<LogprobEntry>* entries = nullptr;
  size_t text_offset = 0;
};

// One Server-Sent Event ("data: ...\n\n") of a streaming response: the first of a chat carries the
// role; text chunks carry content; the last carries finish_reason and the usage. [DONE] follows.
std::string format_role_chunk(const CompletionInfo& info);
std::string format_text_chunk(const CompletionInfo& info, std::string_view text,
                              const LogprobChunk& lp = {});
std::string format_final_chunk(const CompletionInfo& info, std::string_view finish_reason,
                               const Usage& usage, const LogprobChunk& lp = {});
inline constexpr std::string_view kStreamDone = "data: [DONE]\n\n";

std::string format_models(std::string_view model_id, int64_t created);

}  // namespace hearth::server
