// The HTTP/1.1 layer (http.h). One network thread owns every connection while it is read: it
// accepts, reads, parses the request line, headers and body (Content-Length or chunked) under the
// header and body deadlines and the size caps, checks Host, Origin and the admit hook before any
// body byte is read, and writes the short answers it makes itself (400, 403, 404, 408, 413, 431,
// 503, "100 Continue"). A complete request is handed to a worker together with its connection; the
// worker runs the handler and writes the response itself (a write deadline bounds a client that
// does not read), then hands the connection back for its next request. Only the network thread
// closes sockets, so a worker's descriptor stays valid while it holds the connection.
// This file holds HttpServer's public methods; http_impl.h says which file holds the rest.
#include "server/http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "server/http_impl.h"
#include "server/http_util.h"

namespace hearth::server {
namespace {

using http_detail::lower;
using http_detail::to_ip;

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

HttpServer::Impl::~Impl() {
  for (int fd : {listen_fd, epoll_fd, wake_fd}) {
    if (fd >= 0) ::close(fd);
  }
}

HttpServer::HttpServer(const HttpOptions& options) : impl_(std::make_shared<Impl>()) {
  impl_->options = options;
  impl_->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->epoll_fd < 0 || impl_->wake_fd < 0) {
    fail("cannot start the HTTP server: ", std::strerror(errno));
  }
}

HttpServer::~HttpServer() = default;

void HttpServer::get(const std::string& path, HttpHandler handler) {
  impl_->routes[path].by_method["GET"] = std::move(handler);
}

void HttpServer::post(const std::string& path, HttpHandler handler) {
  impl_->routes[path].by_method["POST"] = std::move(handler);
}

int HttpServer::bind(const std::string& host, int port) {
  Impl& m = *impl_;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  const std::string service = std::to_string(port);
  if (getaddrinfo(name.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    fail("cannot listen on ", host, ":", port, " (unknown address)");
  }
  std::string why = "address in use or not local?";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    // SO_REUSEADDR only: SO_REUSEPORT would let a second server share a port already in use.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) fail("cannot listen on ", host, ":", port, " (", why, ")");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const int bound = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                                    : reinterpret_cast<sockaddr_in&>(ss).sin_port);
  if (m.listen_fd >= 0) ::close(m.listen_fd);
  m.listen_fd = fd;
  m.bound_host = lower(name);
  m.bound_ip = to_ip(ss);
  return bound;
}

bool HttpServer::serve() {
  if (impl_->listen_fd < 0) return false;
  impl_->serving = true;
  impl_->run();
  return true;
}

void HttpServer::stop() {
  impl_->stopping = true;
  impl_->wake();
}

HttpStats HttpServer::stats() const {
  const Impl& m = *impl_;
  HttpStats s;
  s.connections = m.n_open;
  s.connections_total = m.n_total;
  s.rejected_total = m.n_rejected;
  s.timeouts_total = m.n_timeouts;
  s.too_large_total = m.n_too_large;
  s.refused_total = m.n_refused;
  return s;
}

}  // namespace hearth::server
