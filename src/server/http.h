// The server's HTTP/1.1 layer, our own (http*.cc; docs/design-notes.md says why): one network
// thread reads and parses every connection with epoll, under deadlines and caps, and hands only
// complete requests to a pool of worker threads, which run the handler and write its response
// (with a write deadline). A slow or idle client therefore costs a socket, never a worker.
// Handlers see our Request and fill our Response; a streaming response gets a StreamSink that
// says when the client has gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::server {

struct HttpRequest {
  std::string method;
  std::string path;  // without the query string
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string remote_addr;                     // the client's numeric address
  // Set by HttpServer, valid during the handler call only; see connection_closed() and
  // input_closed().
  std::function<bool()> is_connection_closed;
  std::function<bool()> is_input_closed;

  // The header's value, or "" when absent (name in any case).
  std::string header(std::string_view name) const;
  // True once the client is certainly gone: its end reset the connection, or a write failed. A
  // handler that answers only at the end (a non-streaming completion) polls it between tokens,
  // so that work nobody will read stops and frees its slot. A poll costs a system call.
  bool connection_closed() const { return is_connection_closed && is_connection_closed(); }
  // True once the client has finished sending (its FIN arrived). It has then either left, or
  // half-closed its end and still waits for the answer: only a write tells the two apart (a
  // client that left answers it with a reset, after which connection_closed() is true).
  bool input_closed() const { return is_input_closed && is_input_closed(); }
};

// Where a streaming response writes. write() returns false once the client is gone; the producer
// must then stop at once (it frees a slot).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(std::string_view data) = 0;
  // As HttpRequest::input_closed: the client finished sending; only a write tells whether it
  // is still there.
  virtual bool input_closed() { return false; }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
  // When set, the response is sent with chunked transfer encoding and `stream` produces its body;
  // `body` is ignored. Called on the worker thread after the headers are sent.
  std::function<void(StreamSink&)> stream;
  // Called once when the response is finished or dropped (also when `stream` never ran, e.g. the
  // client left before the headers went out): releases what `stream` would have used.
  std::function<void()> on_close;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// What the HTTP layer accepts and how long it waits: the server's settings (ServerOptions::http,
// the serve command's flags) as they reach HttpServer.
struct HttpLimits {
  // Request bodies above this are answered 413 as soon as that is known: at once for a
  // Content-Length, at the chunk that crosses it for a chunked body.
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 16 << 10;  // the request line and headers; 431 above
  // Open connections in all, and from one client address; more are answered 503 and closed.
  int max_connections = 512;
  int max_connections_per_client = 128;
  // Seconds: from the connection's start (or a keep-alive request's first byte) to the end of
  // the headers; from there to the end of the body; a keep-alive connection's wait for its next
  // request; a write that makes no progress (a client that does not read). Stalled and
  // byte-dripping clients alike run into the first two.
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double idle_timeout_s = 5;
  double write_timeout_s = 30;
  // On stop(): how long requests being answered may take to finish before their connections
  // are shut down.
  double shutdown_grace_s = 3;
  // Host header names accepted besides the bound address's (and "localhost" on a loopback or
  // wildcard address; any IP address on a wildcard one); "*" accepts any. Others get 403.
  std::vector<std::string> allowed_hosts;
  // Origins ("http://host:port") allowed to make cross-origin requests; "*" allows any. A
  // request whose Origin header is neither its own origin nor listed gets 403.
  std::vector<std::string> cors_origins;
};

struct HttpOptions : HttpLimits {
  // Worker threads: each request being answered (running, queued or streaming) holds one.
  int n_threads = 8;
  // Called on the network thread when a request's headers are in, before its body is read: a
  // response to answer instead (authentication), or nullopt to go on. Must not block.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> admit;
  // The body answered for errors the handlers never see (413 body too large, 404 no such route,
  // 403 a foreign Origin): `message` says why, or is empty for the status's usual meaning.
  std::function<std::string(int status, std::string_view message)> error_body;
};

// What the layer counts, for /metrics.
struct HttpStats {
  int64_t connections = 0;           // open now
  int64_t connections_total = 0;     // accepted so far
  int64_t rejected_total = 0;        // answered 503 at the connection caps
  int64_t timeouts_total = 0;        // closed at a header, body, idle or write deadline
  int64_t too_large_total = 0;       // answered 413 or 431
  int64_t refused_total = 0;         // answered 403: a foreign Host or Origin
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
  // Serves until stop(); returns false when it could not serve (not bound).
  bool serve();
  // Safe from any thread; serve() returns soon after: it stops accepting, closes every
  // connection that is not being answered, gives the ones being answered shutdown_grace_s to
  // finish, then shuts them down and joins the workers.
  void stop();

  HttpStats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hearth::server
