// hearth serve: the OpenAI-compatible HTTP server. It listens before the model is loaded (GET
// /health answers 503 "loading" meanwhile), then answers completions from --parallel slots,
// batched in one forward pass per step (scheduler.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hearth/session.h"
#include "server/http.h"

namespace hearth::server {

struct ServerOptions {
  std::string model_path;
  LoadOptions load;  // mmap, and what goes on a device (n_seq there: n_slots)
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() says which)
  SessionOptions session;  // n_ctx per slot; n_seq is n_slots
  int n_slots = 1;
  int32_t prompt_chunk = 64;  // prompt tokens per step while other slots generate
  bool cache_prompt = true;   // a prompt continues from a slot's cache that starts with it
  size_t queue_capacity = 0;  // 0: 4 per slot
  std::string api_key;        // empty: no authentication
  std::string chat_template;  // family name; empty: detected from the model
  HttpLimits http;  // the HTTP layer's limits and checks (--max-body-kib, --allow-host, ...)
};

class Server {
 public:
  explicit Server(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket and returns its port; hearth::Error when it cannot.
  int bind();
  // Serves while loading the model on the calling thread, then until should_stop() returns true
  // (polled a few times a second, so a signal handler's flag can drive it). Lines for the
  // operator go to `log`. Throws hearth::Error when the model cannot be loaded.
  void run(const std::function<bool()>& should_stop, const std::function<void(const std::string&)>& log);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace hearth::server
