// The endpoints: authentication, the loading state, and the translation between OpenAI requests
// and generation jobs. Parsing and formatting live in openai.cc; this file only wires them.
#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "core/error.h"
#include "server/chat_page.h"
#include "server/openai.h"
#include "server/server_state.h"

namespace hearth::server {
namespace {

using namespace std::chrono_literals;

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse error_response(int status, const std::string& message,
                            const std::string& type = "invalid_request_error") {
  return json_response(status, error_body(status, message, type));
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};  // only makes ids unique; no behaviour depends on it
  return prefix + std::to_string(std::time(nullptr)) + "-" + std::to_string(++counter);
}

// The finish_reason OpenAI knows; a request cut short by shutdown counts as stopped.
std::string_view openai_finish(Finish f) { return f == Finish::Length ? "length" : "stop"; }

// The prompt tokens, the stop strings and the reply style of a parsed request, checked against
// the context: ApiError (400) when the prompt or prompt + max_tokens does not fit.
GenerationRequest to_generation(const Server::State& s, CompletionRequest&& req) {
  GenerationRequest g;
  const Model& m = *s.model;
  if (req.endpoint == Endpoint::Chat) {
    // The template's control tokens are parsed; the messages' text is text, whatever it spells.
    const text::ChatPrompt p = s.chat->render_prompt(req.messages);
    g.prompt = m.tokenize(p.text, m.add_bos_default(), p.content);
    g.stop = s.chat->stop_strings();
    g.trim_leading_space = true;
  } else {
    g.prompt = m.tokenize(req.prompt, m.add_bos_default(), /*parse_special=*/false);
  }
  const int64_t n_ctx = s.scheduler->n_ctx();
  const int64_t n_prompt = static_cast<int64_t>(g.prompt.size());
  if (n_prompt == 0) throw ApiError(400, "the prompt is empty");
  if (n_prompt >= n_ctx) {
    throw ApiError(400, str_cat("the prompt has ", n_prompt, " tokens and the context holds ",
                                n_ctx, " (start the server with a larger -c)"));
  }
  // The last token is sampled from the logits of the one before and never evaluated, so a
  // reply ends at a full context with n_ctx - n_prompt + 1 tokens (Slot::sample).
  if (req.max_tokens >= 0 && n_prompt + req.max_tokens > n_ctx + 1) {
    throw ApiError(400, str_cat("max_tokens ", req.max_tokens, " plus the prompt's ", n_prompt,
                                " tokens exceed the context of ", n_ctx, " (at most ",
                                n_ctx - n_prompt + 1, " new tokens fit)"));
  }
  g.max_tokens = req.max_tokens;
  g.ignore_eos = req.ignore_eos;
  g.logprobs = req.logprobs;
  g.sampling = req.sampling;
  if (!req.has_seed) g.sampling.seed = std::random_device{}();
  g.stop.insert(g.stop.end(), req.stop.begin(), req.stop.end());
  return g;
}

// The job's tokens' log-probabilities from the `from`-th on, with their texts.
std::vector<LogprobEntry> logprob_entries(const Model& model, const GenerationJob& job,
                                          size_t from) {
  std::vector<LogprobEntry> entries;
  for (const TokenLogprobs& t : job.logprobs_from(from)) {
    LogprobEntry e{model.token_to_piece(t.id), t.logprob, {}};
    for (const auto& [id, lp] : t.top) e.top.emplace_back(model.token_to_piece(id), lp);
    entries.push_back(std::move(e));
  }
  return entries;
}

// The response body of a finished job: its text, and its tokens' log-probabilities when it asked.
std::string final_body(const Model& model, const CompletionInfo& info, const std::string& text,
                       const GenerationJob& job) {
  const GenerationResult& r = job.result();
  const Usage usage{r.n_prompt, r.n_generated};
  if (job.request().logprobs < 0) {
    return format_response(info, text, openai_finish(r.finish), usage);
  }
  const std::vector<LogprobEntry> entries = logprob_entries(model, job, 0);
  return format_response(info, text, openai_finish(r.finish), usage, &entries);
}

// A stream's log-probabilities: each chunk takes those of the tokens generated since the last.
class LogprobStream {
 public:
  LogprobStream(std::shared_ptr<const Model> model, const GenerationJob& job)
      : model_(std::move(model)), on_(job.request().logprobs >= 0) {}

  LogprobChunk next(const GenerationJob& job) {
    if (!on_) return {};
    entries_ = logprob_entries(*model_, job, sent_);
    const LogprobChunk chunk{&entries_, offset_};
    sent_ += entries_.size();
    for (const LogprobEntry& e : entries_) offset_ += e.token.size();
    return chunk;
  }

 private:
  std::shared_ptr<const Model> model_;
  bool on_;
  std::vector<LogprobEntry> entries_;
  size_t sent_ = 0, offset_ = 0;
};

// The answer to a client that has finished sending while it waited (its FIN arrived): it has
// either left or half-closed its end and still reads. Only a write tells the two apart, so the
// status is committed now (200) and the JSON body follows leading spaces, written every 250 ms
// while it waits: a client that left answers the first with a reset, the next write fails, and
// the job is cancelled. Should the job fail after all, its error body comes with that 200.
HttpResponse answer_half_closed(Server::State& s, const std::shared_ptr<GenerationJob>& job,
                                const CompletionInfo& info, std::string text) {
  HttpResponse res;
  Scheduler* scheduler = s.scheduler.get();
  res.stream = [job, info, text = std::move(text), scheduler,
                model = s.model](StreamSink& sink) mutable {
    std::string piece;
    bool probe = true;
    for (;;) {
      if (probe && !sink.write(" ")) return scheduler->cancel(job);
      probe = false;
      switch (job->next(piece, 250ms)) {
        case GenerationJob::Event::Text: text += piece; break;
        case GenerationJob::Event::Timeout: probe = true; break;
        case GenerationJob::Event::Failed:
          sink.write(job->error() == kShuttingDown
                         ? error_body(503, job->error(), "unavailable_error")
                         : error_body(500, job->error(), "server_error"));
          return;
        case GenerationJob::Event::Done:
          sink.write(final_body(*model, info, text, *job));
          return;
      }
    }
  };
  res.on_close = [job, scheduler] { scheduler->cancel(job); };
  return res;
}

// The whole answer at the end. Between tokens, and every 250 ms while queued, it checks that the
// client is still there: one that left gets its job cancelled (and out of the queue), which frees
// its slot or its place at once.
HttpResponse wait_for_result(Server::State& s, const std::shared_ptr<GenerationJob>& job,
                             const CompletionInfo& info, const HttpRequest& http) {
  std::string text, piece;
  for (;;) {
    if (http.connection_closed()) {
      s.scheduler->cancel(job);
      return error_response(499, "the client closed the connection");  // nobody reads it
    }
    if (http.input_closed()) return answer_half_closed(s, job, info, std::move(text));
    switch (job->next(piece, 250ms)) {
      case GenerationJob::Event::Text: text += piece; break;
      case GenerationJob::Event::Timeout: break;
      case GenerationJob::Event::Failed:
        return job->error() == kShuttingDown
                   ? error_response(503, job->error(), "unavailable_error")
                   : error_response(500, job->error(), "server_error");
      case GenerationJob::Event::Done:
        return json_response(200, final_body(*s.model, info, text, *job));
    }
  }
}

HttpResponse stream_result(Server::State& s, const std::shared_ptr<GenerationJob>& job,
                           const CompletionInfo& info) {
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.headers["Cache-Control"] = "no-cache";
  Scheduler* scheduler = s.scheduler.get();
  res.stream = [job, info, scheduler, model = s.model](StreamSink& sink) {
    if (info.endpoint == Endpoint::Chat && !sink.write(format_role_chunk(info))) {
      return scheduler->cancel(job);
    }
    LogprobStream logprobs(model, *job);
    std::string piece;
    int idle_ticks = 0;
    for (;;) {
      bool ok = true;
      switch (job->next(piece, 250ms)) {
        case GenerationJob::Event::Text:
          ok = sink.write(format_text_chunk(info, piece, logprobs.next(*job)));
          idle_ticks = 0;
          break;
        // An SSE comment while waiting (in the queue, or for a long prompt): finds a client that
        // left. Every second, and every 250 ms once the client has finished sending (it left, or
        // half-closed: the write tells which).
        case GenerationJob::Event::Timeout:
          if (++idle_ticks % 4 == 0 || sink.input_closed()) ok = sink.write(": waiting\n\n");
          break;
        case GenerationJob::Event::Failed:
          sink.write("data: " + error_body(500, job->error(), "server_error") + "\n\n");
          return;
        case GenerationJob::Event::Done: {
          const GenerationResult& r = job->result();
          if (sink.write(format_final_chunk(info, openai_finish(r.finish),
                                            {r.n_prompt, r.n_generated}, logprobs.next(*job)))) {
            sink.write(kStreamDone);
          }
          return;
        }
      }
      if (!ok) return scheduler->cancel(job);  // the client left: free the slot at its next token
    }
  };
  res.on_close = [job, scheduler] { scheduler->cancel(job); };
  return res;
}

HttpResponse complete(Server::State& s, const HttpRequest& http, Endpoint endpoint) {
  s.metrics.on_request();
  CompletionRequest req = parse_completion_request(http.body, endpoint);
  const bool stream = req.stream;
  auto job = std::make_shared<GenerationJob>(to_generation(s, std::move(req)));
  if (!s.scheduler->submit(job)) {
    s.metrics.on_rejected();
    HttpResponse r = error_response(
        503, "the server is busy: every slot is taken and the queue is full; retry later",
        "server_overloaded");
    r.headers.emplace("Retry-After", std::string("1"));
    return r;
  }
  CompletionInfo info{endpoint, new_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-"),
                      s.model_id, static_cast<int64_t>(std::time(nullptr))};
  return stream ? stream_result(s, job, info) : wait_for_result(s, job, info, http);
}

HttpResponse tokenize(const Server::State& s, const HttpRequest& http) {
  return json_response(200, format_tokens(s.model->tokenize(parse_tokenize_request(http.body),
                                                            /*add_bos=*/false)));
}

HttpResponse detokenize(const Server::State& s, const HttpRequest& http) {
  const auto n_vocab = static_cast<int64_t>(s.model->config().n_vocab);
  std::string text;
  for (const int32_t t : parse_detokenize_request(http.body)) {
    if (t >= n_vocab) throw ApiError(400, str_cat("token id ", t, " is not in the vocabulary of ", n_vocab));
    text += s.model->token_to_piece(t);
  }
  // The tokenizer's dummy prefix is not part of the text (so that tokenize then detokenize
  // returns the input).
  if (s.model->adds_space_prefix() && text.starts_with(' ')) text.erase(0, 1);
  return json_response(200, format_content(text));
}

// Wraps a handler with the checks every endpoint but /health and the chat page share: the
// loading state, and the translation of errors into OpenAI error bodies. (The API key was checked
// before the body was read: admit() below.)
HttpHandler guarded(Server::State& s, std::function<HttpResponse(const HttpRequest&)> handler) {
  return [&s, handler = std::move(handler)](const HttpRequest& req) {
    if (!s.ready.load(std::memory_order_acquire)) {
      HttpResponse r = error_response(503, "the model is loading", "unavailable_error");
      r.headers.emplace("Retry-After", std::string("1"));
      return r;
    }
    try {
      return handler(req);
    } catch (const ApiError& e) {
      return error_response(e.status, e.what(), e.type);
    } catch (const Error& e) {  // the engine refused the input (a prompt it cannot tokenize)
      return error_response(400, e.what());
    } catch (const std::exception& e) {
      return error_response(500, e.what(), "server_error");
    }
  };
}

HttpResponse chat_page() {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(embedded::chat_page_html());
  // The page needs nothing but itself and this server's API; the policy keeps it that way.
  r.headers["Content-Security-Policy"] =
      "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
      "connect-src 'self'; img-src data:; base-uri 'none'";
  r.headers["Cache-Control"] = "no-cache";
  return r;
}

// Compares in a time that does not depend on where the strings differ (an API key guessed byte
// by byte must not show in the answer's timing).
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::optional<HttpResponse> admit(const Server::State& s, const HttpRequest& req) {
  // Public like /health, as llama-server's page is: the page asks for the key itself.
  if (s.options.api_key.empty() || req.path == "/" || req.path == "/health") return std::nullopt;
  if (same_secret(req.header("Authorization"), "Bearer " + s.options.api_key)) return std::nullopt;
  return error_response(401, "invalid or missing API key (Authorization: Bearer KEY)",
                        "authentication_error");
}

void add_routes(Server::State& s) {
  HttpServer& h = *s.http;
  // Public like /health, as llama-server's page is: it holds no data, and the page asks for the
  // API key itself and sends it with its API calls.
  h.get("/", [](const HttpRequest&) { return chat_page(); });
  h.get("/health", [&s](const HttpRequest&) {
    return s.ready.load(std::memory_order_acquire)
               ? json_response(200, R"({"status":"ok"})")
               : json_response(503, R"({"status":"loading"})");
  });
  h.get("/v1/models", guarded(s, [&s](const HttpRequest&) {
          return json_response(200, format_models(s.model_id, s.created));
        }));
  h.post("/v1/chat/completions",
         guarded(s, [&s](const HttpRequest& r) { return complete(s, r, Endpoint::Chat); }));
  h.post("/v1/completions",
         guarded(s, [&s](const HttpRequest& r) { return complete(s, r, Endpoint::Completion); }));
  h.post("/tokenize", guarded(s, [&s](const HttpRequest& r) { return tokenize(s, r); }));
  // llama-server's: the conversation rendered with the model's template and its BOS/EOS texts,
  // the generation prompt added, nothing generated.
  h.post("/apply-template", guarded(s, [&s](const HttpRequest& r) {
           const std::string messages = parse_apply_template_request(r.body);
           return json_response(200, format_prompt(s.chat->render_json(messages, true)));
         }));
  h.post("/detokenize", guarded(s, [&s](const HttpRequest& r) { return detokenize(s, r); }));
  h.get("/metrics", guarded(s, [&s](const HttpRequest&) {
          HttpResponse r =
              json_response(200, s.metrics.prometheus(s.scheduler->gauges(), s.http->stats()));
          r.content_type = "text/plain; version=0.0.4";
          return r;
        }));
}

}  // namespace hearth::server
