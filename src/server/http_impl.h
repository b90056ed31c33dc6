// HttpServer's state, shared by the files of the HTTP layer: http.cc (the public methods),
// http_loop.cc (the network thread: the loop, accepting, reading, deadlines and caps),
// http_requests.cc (from bytes to requests on the network thread: parsing in turn, admission,
// the network thread's own answers) and http_workers.cc (answering requests on the workers).
// Internal to src/server.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http.h"
#include "server/http_conn.h"
#include "server/http_util.h"

namespace hearth::server {

namespace http_detail {

struct Route {
  std::map<std::string, HttpHandler> by_method;
};

}  // namespace http_detail

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  using Clock = http_detail::Clock;
  using Conn = http_detail::Conn;

  HttpOptions options;
  std::map<std::string, http_detail::Route> routes;

  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::string bound_host;  // as given to bind(), lower case, without brackets
  http_detail::IpAddr bound_ip;

  std::atomic<bool> stopping{false};
  std::atomic<bool> serving{false};

  // Network thread only.
  std::unordered_map<int, std::shared_ptr<Conn>> conns;
  std::unordered_map<std::string, int> per_peer;
  Clock::time_point accept_paused_until{};
  bool accept_paused = false;

  // Handing connections to workers and back.
  std::mutex mu;
  std::condition_variable work_cv;
  std::deque<std::shared_ptr<Conn>> work;
  std::deque<std::shared_ptr<Conn>> returned;
  bool workers_quit = false;
  std::vector<std::thread> workers;

  std::atomic<int64_t> n_open{0}, n_total{0}, n_rejected{0}, n_timeouts{0}, n_too_large{0},
      n_refused{0};

  ~Impl();

  std::string error_json(int status, std::string_view message = {}) const {
    return options.error_body ? options.error_body(status, message) : std::string();
  }

  void wake();

  // ---- the network thread (http_loop.cc) -----------------------------------------------------

  void watch(Conn& c, bool add);
  void close_conn(const std::shared_ptr<Conn>& c);
  // A short answer of the network thread's own, written without waiting: the connection is
  // refused (caps) or timed out, and nothing more is owed to it.
  void send_and_forget(int fd, int status, std::string_view message);
  void accept_all();
  // At the connection cap: the keep-alive connection idle the longest makes room.
  void evict_idle();
  void on_readable(const std::shared_ptr<Conn>& cp);
  void dispatch(Conn& c);
  void take_returned();
  void sweep(Clock::time_point now);
  void run();
  // Parts of run(): one epoll event of a connection, the start of stop()'s drain, and its end
  // when the grace period has run out.
  void on_event(const epoll_event& ev);
  void begin_drain();
  void force_shutdown();

  // ---- from bytes to requests (http_requests.cc) ---------------------------------------------

  // Starts waiting for the connection's next request (the keep-alive wait).
  void next_request(Conn& c);
  // Answers from the network thread: an error body for `message` (json), or `body` as it is.
  // With close, the connection then lingers: it is half-closed and what the client still sends is
  // read and dropped for a while, so that the client reads the answer instead of meeting a reset.
  void answer(Conn& c, int status, std::string_view message, bool close,
              std::map<std::string, std::string> headers = {});
  void answer_raw(Conn& c, int status, bool close, std::map<std::string, std::string> headers,
                  const std::string& body, const std::string& content_type);
  // Writes what the network thread has to send; false when the connection was closed. An answer
  // fully written either lingers (close) or starts the wait for the next request.
  bool flush(Conn& c);
  // Parses what has been read, request after request (pipelining), until more bytes are needed
  // or the connection is handed to a worker, answered with a close, or closed.
  void process(Conn& c);
  // Parses the request line and headers once they are all in, then admits the request: false
  // when more bytes are needed, true when the head was consumed (the connection then reads the
  // body, was dispatched, or is being answered).
  bool parse_headers(Conn& c);
  // Host, Origin, the route and the admit hook, before any body byte is read; false when it
  // answered instead.
  bool admit(Conn& c, bool has_body);

  // ---- the workers (http_workers.cc) ---------------------------------------------------------

  // Where a streaming response writes: chunks (or raw bytes for HTTP/1.0) through send_all().
  class Sink;

  void worker_main();
  // Writes all of data, waiting for the socket while it makes progress within the write
  // deadline; false (and the connection marked broken) when it cannot.
  bool send_all(Conn& c, std::string_view data);
  void respond(Conn& c);
};

}  // namespace hearth::server
