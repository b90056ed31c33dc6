// A small HTTP server interface over cpp-httplib, so that no httplib type leaks into the rest of
// the server: handlers see our Request and fill our Response, and a streaming response gets a
// StreamSink that says when the client has gone.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace hearth::server {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  // Set by HttpServer, valid during the handler call only; see connection_closed().
  std::function<bool()> is_connection_closed;

  // The header's value, or "" when absent (name in any case).
  std::string header(std::string_view name) const;
  // True once the client has closed its end of the connection. A handler that answers only at
  // the end (a non-streaming completion) polls it between tokens, so that work nobody will read
  // stops and frees its slot. A poll costs a system call; false when it cannot be told.
  bool connection_closed() const { return is_connection_closed && is_connection_closed(); }
};

// Where a streaming response writes. write() returns false once the client is gone; the producer
// must then stop at once (it frees a slot).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
  // When set, the response is sent with chunked transfer encoding and `stream` produces its body;
  // `body` is ignored. Called on the connection's thread after the headers are sent.
  std::function<void(StreamSink&)> stream;
  // Called once when the response is finished or dropped (also when `stream` never ran, e.g. the
  // client left before the headers went out): releases what `stream` would have used.
  std::function<void()> on_close;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpOptions {
  size_t max_body_bytes = 1 << 20;
  // Connection threads: each open request (running, queued or streaming) holds one.
  int n_threads = 8;
  // The body answered for errors the handlers never see (413 body too large, 404 no such route).
  std::function<std::string(int status)> error_body;
};

class HttpServer {
 public:
  explicit HttpServer(const HttpOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void get(const std::string& path, HttpHandler handler);
  void post(const std::string& path, HttpHandler handler);

  // Binds the listening socket; port 0 picks a free one. Returns the port; throws hearth::Error
  // when the address cannot be bound.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns false when listening failed.
  bool serve();
  // Safe from any thread; serve() returns soon after.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::server
