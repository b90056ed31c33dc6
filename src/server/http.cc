#include "server/http.h"

#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace hearth::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

class SinkAdapter final : public StreamSink {
 public:
  explicit SinkAdapter(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    // After one failed write the socket is dead: never write to it again.
    ok_ = ok_ && sink_.is_writable() && sink_.write(data.data(), data.size());
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

// The numeric address and port of one end of a socket, written as httplib writes
// Request::remote_addr and local_addr.
bool socket_end(int fd, bool peer, std::string& addr, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  const int flags = NI_NUMERICHOST | NI_NUMERICSERV;
  if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, flags) != 0) return false;
  addr = host;
  port = std::atoi(serv);
  return true;
}

// cpp-httplib 0.11 (Debian 12's) shows a handler neither its connection's socket nor whether
// the client is gone (Request::is_connection_closed came in later versions). A handler runs while
// its connection is open, so the socket is one of this process's descriptors: the one whose two
// ends are the request's addresses. -1 when none is (not Linux, or the addresses are unknown).
int find_socket(const httplib::Request& req) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    std::string addr;
    int port = 0;
    if (!socket_end(fd, /*peer=*/true, addr, port) || port != req.remote_port ||
        addr != req.remote_addr) {
      continue;
    }
    if (req.local_port > 0 &&
        (!socket_end(fd, /*peer=*/false, addr, port) || port != req.local_port)) {
      continue;
    }
    return fd;
  }
  return -1;
}

// Whether the peer has closed the connection, without waiting and without consuming anything:
// readable with nothing to read is the client's FIN (as httplib's own is_socket_alive tells it).
bool socket_closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;  // nothing arrived: the client is still there
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

HttpRequest to_request(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  r.body = req.body;
  for (const auto& [name, value] : req.headers) r.headers.emplace(lower(name), value);
  return r;
}

void fill_response(HttpResponse&& ours, httplib::Response& res) {
  res.status = ours.status;
  for (const auto& [name, value] : ours.headers) res.set_header(name, value);
  if (!ours.stream) {
    res.set_content(ours.body, ours.content_type);
    if (ours.on_close) ours.on_close();
    return;
  }
  auto stream = std::move(ours.stream);
  auto on_close = std::move(ours.on_close);
  res.set_chunked_content_provider(
      ours.content_type,
      [stream](size_t, httplib::DataSink& sink) {
        SinkAdapter adapter(sink);
        stream(adapter);
        if (!adapter.ok()) return false;  // drops the connection
        sink.done();
        return true;
      },
      [on_close](bool) {
        if (on_close) on_close();
      });
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

struct HttpServer::Impl {
  httplib::Server server;
  HttpOptions options;

  httplib::Server::Handler wrap(HttpHandler handler) {
    return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      HttpRequest ours = to_request(req);
      // The socket is looked for on the first poll only: most handlers never ask.
      ours.is_connection_closed = [&req, fd = -2]() mutable {
        if (fd == -2) fd = find_socket(req);
        return fd >= 0 && socket_closed(fd);
      };
      fill_response(handler(ours), res);
    };
  }
};

HttpServer::HttpServer(const HttpOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  auto& s = impl_->server;
  s.set_payload_max_length(options.max_body_bytes);
  // httplib's default adds SO_REUSEPORT, which lets a second server bind a port already in use
  // and silently share its connections; a busy port must be an error instead.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const size_t n_threads = static_cast<size_t>(std::max(1, options.n_threads));
  s.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  // Errors httplib answers by itself (413, 404) get the same JSON shape as ours; our own error
  // responses already carry a body and are left alone.
  s.set_error_handler([error_body = options.error_body](const httplib::Request&,
                                                        httplib::Response& res) {
    if (res.body.empty() && error_body) res.set_content(error_body(res.status), "application/json");
  });
  s.set_exception_handler([error_body = options.error_body](const httplib::Request&,
                                                            httplib::Response& res,
                                                            std::exception_ptr) {
    res.status = 500;
    if (error_body) res.set_content(error_body(500), "application/json");
  });
}

HttpServer::~HttpServer() = default;

void HttpServer::get(const std::string& path, HttpHandler handler) {
  impl_->server.Get(path, impl_->wrap(std::move(handler)));
}

void HttpServer::post(const std::string& path, HttpHandler handler) {
  impl_->server.Post(path, impl_->wrap(std::move(handler)));
}

int HttpServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? impl_->server.bind_to_any_port(host)
                              : (impl_->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) fail("cannot listen on ", host, ":", port, " (address in use or not local?)");
  return bound;
}

bool HttpServer::serve() { return impl_->server.listen_after_bind(); }

void HttpServer::stop() { impl_->server.stop(); }

}  // namespace hearth::server
