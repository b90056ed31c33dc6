// What the HTTP handlers share: the options, the model and scheduler once loaded, the metrics.
// Internal to src/server.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "hearth/model.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/server.h"
#include "text/chat_renderer.h"

namespace hearth::server {

struct Server::State {
  ServerOptions options;
  Metrics metrics;
  // Set once by the loading thread before `ready` turns true (release), read by handlers only
  // after they saw `ready` (acquire); never changed again.
  std::shared_ptr<const Model> model;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<text::ChatRenderer> chat;
  std::string model_id;
  int64_t created = 0;
  std::atomic<bool> ready{false};
  std::unique_ptr<HttpServer> http;
};

// Registers every endpoint on state.http.
void add_routes(Server::State& state);
// The check of a request's headers before its body is read (HttpOptions::admit): the API key.
std::optional<HttpResponse> admit(const Server::State& state, const HttpRequest& request);

}  // namespace hearth::server
