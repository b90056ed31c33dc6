// hearth serve: the OpenAI-compatible HTTP server (src/server). This file parses the flags and
// turns SIGINT/SIGTERM into a clean shutdown.
#include <signal.h>

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

// Global because a signal handler can reach the program only through a lock-free flag: set by
// SIGINT or SIGTERM, polled by Server::run, which then shuts down and returns.
volatile std::sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }

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
    install_signal_handlers();
    server::Server server(o);
    const int port = server.bind();
    log_line("listening on http://" + o.host + ":" + std::to_string(port) + " (loading " +
             model_path + ")");
    server.run([] { return g_stop != 0; }, log_line);
    return 0;
  });
}

}  // namespace hearth::cli
