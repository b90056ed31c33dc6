#include "server/server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "server/openai.h"
#include "server/server_state.h"

namespace hearth::server {
namespace {

std::unique_ptr<text::ChatRenderer> choose_template(
    const ServerOptions& o, const Model& model, const std::function<void(const std::string&)>& log) {
  std::string note;
  auto chat = std::make_unique<text::ChatRenderer>(
      text::ChatRenderer::choose(o.chat_template, model.chat_template(),
                                 model.token_text(model.bos()), model.token_text(model.eos()), &note));
  log(note);
  return chat;
}

}  // namespace

Server::Server(const ServerOptions& options) : state_(std::make_unique<State>()) {
  state_->options = options;
  if (options.n_slots < 1) fail("--parallel must be at least 1");
  if (options.prompt_chunk < 1) fail("--prompt-chunk must be at least 1");
  if (state_->options.queue_capacity == 0) {
    state_->options.queue_capacity = 4 * static_cast<size_t>(options.n_slots);
  }
  HttpOptions http;
  static_cast<HttpLimits&>(http) = options.http;
  // One worker per slot and queued request, plus a few for /health, /metrics and requests that
  // are only answered 503. Connections still sending, and idle ones, hold none.
  http.n_threads = options.n_slots + static_cast<int>(state_->options.queue_capacity) + 4;
  http.error_body = [](int status, std::string_view message) {
    return default_error_body(status, message);
  };
  State* state = state_.get();
  http.admit = [state](const HttpRequest& r) { return admit(*state, r); };
  state_->http = std::make_unique<HttpServer>(http);
  add_routes(*state_);
}

Server::~Server() = default;

int Server::bind() { return state_->http->bind(state_->options.host, state_->options.port); }

void Server::run(const std::function<bool()>& should_stop,
                 const std::function<void(const std::string&)>& log) {
  State& s = *state_;
  std::atomic<bool> listening_done{false};
  std::thread listener([&] {
    if (!s.http->serve()) log("the listener stopped with an error");
    listening_done = true;
  });
  // The listener must be stopped and joined on every way out, the load failing included.
  struct Join {
    State& s;
    std::thread& t;
    std::atomic<bool>& done;
    // The scheduler first: it ends the jobs that connection threads wait on, so that the
    // listener's thread pool can then be joined.
    ~Join() {
      if (s.scheduler) s.scheduler->stop();
      // Until it has stopped: a stop() that comes before the listener runs is lost.
      while (!done) {
        s.http->stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      t.join();
    }
  } join{s, listener, listening_done};

  const auto t0 = std::chrono::steady_clock::now();
  s.model = Model::load(s.options.model_path, s.options.load);
  if (!s.model->placement_note().empty()) log(s.model->placement_note());
  s.chat = choose_template(s.options, *s.model, log);
  s.model_id = std::filesystem::path(s.options.model_path).filename().string();
  s.created = static_cast<int64_t>(std::time(nullptr));
  SchedulerOptions so;
  so.n_slots = s.options.n_slots;
  so.queue_capacity = s.options.queue_capacity;
  so.prompt_chunk = s.options.prompt_chunk;
  so.cache_prompt = s.options.cache_prompt;
  s.scheduler = std::make_unique<Scheduler>(
      s.model, s.options.session, so, [&s](const GenerationResult& r) { s.metrics.on_result(r); });
  s.ready.store(true, std::memory_order_release);
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log(str_cat("model ", s.model_id, " loaded in ", load_s, " s; ", s.options.n_slots,
              " slot(s) of ", s.scheduler->n_ctx(), " tokens, queue ", s.options.queue_capacity));
  while (!should_stop()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  log("shutting down");
  // Both at once: queued requests fail now and running ones end after the engine's current step,
  // while the HTTP layer stops accepting and closes every connection not being answered. A step
  // cannot be interrupted: should one outlast the grace (a long prompt chunk on a large model),
  // the process exits without it rather than keep the signal waiting.
  s.scheduler->request_stop();
  s.http->stop();
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(s.options.http.shutdown_grace_s + 2));
  if (!s.scheduler->wait_stopped(limit)) {
    log("the engine is still in a step; exiting without waiting for it");
    std::fflush(stderr);
    std::_Exit(0);
  }
}

}  // namespace hearth::server
