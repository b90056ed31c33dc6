// hearth serve: the OpenAI-compatible HTTP server (src/server). This file parses the flags and
// turns SIGINT/SIGTERM into a clean shutdown.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "device_flags.h"
#include "commands.h"
#include "server/server.h"
#include "text/chat_template.h"

namespace hearth::cli {
namespace {

// Global because a signal handler can reach the program only through a lock-free atomic: the
// count of SIGINT and SIGTERM received, polled by Server::run, which shuts down and returns at the
// first (within a few seconds: --shutdown-grace bounds the requests still being answered). A
// second signal ends the process at once, by that signal. Two signals can run their handlers at
// the same time on two threads, so the count is taken and raised in one step.
std::atomic<int> g_stops{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler needs a lock-free counter");

void on_stop_signal(int sig) {
  if (g_stops.fetch_add(1) > 0) {
    constexpr char kMsg[] = "hearth serve: second signal: exiting now\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    ::signal(sig, SIG_DFL);
    ::raise(sig);  // delivered when this handler returns
  }
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A client that leaves mid-stream must cost a failed write, not the process.
  signal(SIGPIPE, SIG_IGN);
}

void log_line(const std::string& line) {
  std::fprintf(stderr, "hearth serve: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  CLI::App app("OpenAI-compatible HTTP server: a chat page at /, /v1/chat/completions, "
               "/v1/completions, /v1/models, /health, /metrics, /tokenize, /detokenize", "serve");
  server::ServerOptions o;
  std::string model_path;
  int n_queue = 0;
  SessionFlags sf;
  DeviceFlags df;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "port to listen on (0: any free port, printed on stderr)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--parallel", o.n_slots,
                 "slots: requests generated at the same time, batched in one forward pass per "
                 "step, each with its own context of -c tokens")
      ->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--prompt-chunk", o.prompt_chunk,
                 "prompt tokens evaluated per step while other slots generate")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  bool no_cache_prompt = false;
  app.add_flag("--no-cache-prompt", no_cache_prompt,
               "always evaluate the whole prompt (default: continue from a slot's cache that "
               "starts with it)");
  app.add_option("--queue", n_queue, "requests that may wait for a slot (default: 4 per slot)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--api-key", o.api_key,
                 "require 'Authorization: Bearer KEY' on every endpoint but /health and the "
                 "chat page at / (which asks for the key)");
  app.add_option("--allow-host", o.http.allowed_hosts,
                 "also accept requests whose Host header names NAME (repeatable; '*' accepts "
                 "any). By default only the --host address is accepted (and localhost and the "
                 "loopback addresses on a loopback or wildcard --host; any IP address on a "
                 "wildcard one): others get 403, which stops DNS-rebinding pages")
      ->type_name("NAME");
  app.add_option("--cors", o.http.cors_origins,
                 "allow cross-origin browser requests from ORIGIN, e.g. http://localhost:3000 "
                 "(repeatable; '*' allows any). By default a request whose Origin header is not "
                 "the server's own gets 403")
      ->type_name("ORIGIN");
  app.add_option("--max-connections", o.http.max_connections,
                 "open connections at most; more are answered 503 (an idle keep-alive one is "
                 "closed first)")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--max-connections-per-client", o.http.max_connections_per_client,
                 "open connections from one client address at most; more are answered 503")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  size_t max_body_kib = o.http.max_body_bytes >> 10;
  app.add_option("--max-body-kib", max_body_kib,
                 "request body limit in KiB, for every transfer encoding (413 above it, as soon "
                 "as it is known)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))->capture_default_str();
  app.add_option("--header-timeout", o.http.header_timeout_s,
                 "seconds for a request's line and headers to arrive, from the connection's "
                 "start (or a keep-alive request's first byte); slow senders count against it")
      ->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  app.add_option("--body-timeout", o.http.body_timeout_s,
                 "seconds for a request's body to arrive after its headers")
      ->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  app.add_option("--idle-timeout", o.http.idle_timeout_s,
                 "seconds a keep-alive connection may wait for its next request")
      ->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  app.add_option("--write-timeout", o.http.write_timeout_s,
                 "seconds a response write may make no progress (a client that does not read) "
                 "before the connection is dropped")
      ->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  app.add_option("--shutdown-grace", o.http.shutdown_grace_s,
                 "on SIGINT/SIGTERM, seconds the requests being answered get to finish before "
                 "their connections are closed (a second signal exits at once)")
      ->check(CLI::Range(0.0, 600.0))->capture_default_str();
  app.add_option("--chat-template", o.chat_template,
                 "template family: " + text::chat_family_names() + " (default: from the model)")
      ->check(
          [](const std::string& v) {
            return text::parse_chat_family(v) ? std::string() : "unknown chat template '" + v + "'";
          },
          "");
  sf.add_to(app);
  df.add_to(app);
  return run_app(app, argc, argv, [&] {
    o.model_path = model_path;
    o.load = df.load_options(sf, o.n_slots);
    o.session = sf.options();
    o.cache_prompt = !no_cache_prompt;
    o.queue_capacity = static_cast<size_t>(n_queue);
    o.http.max_body_bytes = max_body_kib << 10;
    install_signal_handlers();
    server::Server server(o);
    const int port = server.bind();
    log_line("listening on http://" + o.host + ":" + std::to_string(port) + " (loading " +
             model_path + ")");
    server.run([] { return g_stops.load() != 0; }, log_line);
    return 0;
  });
}

}  // namespace hearth::cli
