// The HTTP layer's network thread (http_impl.h): the epoll loop, accepting under the connection
// caps, reading, the deadlines, and stop()'s drain. Connections are closed here only, so a
// worker's descriptor stays valid while it holds the connection.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "server/http_impl.h"

namespace hearth::server {
namespace {

using http_detail::Clock;
using http_detail::Conn;
using http_detail::kLingerBytes;
using http_detail::numeric_host;
using http_detail::Phase;
using http_detail::response_head;
using http_detail::seconds;
using http_detail::set_nodelay;

constexpr size_t kReadChunk = 64 << 10;
constexpr int kMaxEvents = 64;

}  // namespace

void HttpServer::Impl::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
}

void HttpServer::Impl::watch(Conn& c, bool add) {
  epoll_event ev{};
  ev.data.fd = c.fd;
  if (c.phase == Phase::Writing) {
    ev.events = EPOLLOUT;
  } else {
    ev.events = EPOLLIN | EPOLLRDHUP;
    if (c.out_off < c.out.size()) ev.events |= EPOLLOUT;
  }
  epoll_ctl(epoll_fd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpServer::Impl::close_conn(const std::shared_ptr<Conn>& c) {
  if (c->fd < 0) return;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  conns.erase(c->fd);
  if (auto it = per_peer.find(c->peer); it != per_peer.end() && --it->second <= 0) {
    per_peer.erase(it);
  }
  c->fd = -1;
  --n_open;
}

void HttpServer::Impl::send_and_forget(int fd, int status, std::string_view message) {
  const std::string body = error_json(status, message);
  std::map<std::string, std::string> h;
  if (status == 503) h.emplace("Retry-After", "1");
  const std::string r =
      response_head(status, "application/json", h, static_cast<int64_t>(body.size()), false,
                    false) + body;
  [[maybe_unused]] const ssize_t n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void HttpServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment rather than spin on the listener.
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        accept_paused = true;
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    ++n_total;
    const std::string peer = numeric_host(ss);
    if (static_cast<int>(conns.size()) >= options.max_connections) evict_idle();
    int& from_peer = per_peer[peer];
    if (static_cast<int>(conns.size()) >= options.max_connections ||
        from_peer >= options.max_connections_per_client) {
      if (from_peer == 0) per_peer.erase(peer);
      ++n_rejected;
      send_and_forget(fd, 503, "too many connections; retry later");
      ::close(fd);
      continue;
    }
    ++from_peer;
    ++n_open;
    set_nodelay(fd);
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    c->peer = peer;
    c->deadline = Clock::now() + seconds(options.header_timeout_s);
    conns.emplace(fd, c);
    watch(*c, /*add=*/true);
  }
}

void HttpServer::Impl::evict_idle() {
  std::shared_ptr<Conn> oldest;
  for (const auto& [fd, c] : conns) {
    if (c->phase == Phase::Headers && c->idle && !c->fresh && c->in.empty() &&
        (!oldest || c->deadline < oldest->deadline)) {
      oldest = c;
    }
  }
  if (oldest) close_conn(oldest);
}

void HttpServer::Impl::on_readable(const std::shared_ptr<Conn>& cp) {
  Conn& c = *cp;
  char buf[kReadChunk];
  for (int round = 0; round < 4; ++round) {  // then let other connections have their turn
    if (c.fd < 0) return;
    if (c.phase != Phase::Headers && c.phase != Phase::Body && c.phase != Phase::Lingering) return;
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) close_conn(cp);
      return;
    }
    if (n == 0) {
      // Nothing more will come: a request still incomplete never will be. (A complete one was
      // dispatched before its FIN was read: the worker sees the FIN, and the response goes
      // out before this read happens.)
      close_conn(cp);
      return;
    }
    if (c.phase == Phase::Lingering) {
      c.lingered += static_cast<size_t>(n);
      if (c.lingered > kLingerBytes) {
        close_conn(cp);
        return;
      }
      continue;
    }
    if (c.idle) {  // a request's first byte: its header deadline starts now
      c.idle = false;
      if (!c.fresh) c.deadline = Clock::now() + seconds(options.header_timeout_s);
    }
    c.in.append(buf, static_cast<size_t>(n));
    process(c);
  }
}

void HttpServer::Impl::dispatch(Conn& c) {
  c.phase = Phase::Dispatched;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  {
    std::lock_guard lock(mu);
    work.push_back(conns.at(c.fd));
  }
  work_cv.notify_one();
}

void HttpServer::Impl::take_returned() {
  std::deque<std::shared_ptr<Conn>> back;
  {
    std::lock_guard lock(mu);
    back.swap(returned);
  }
  for (auto& c : back) {
    if (c->close_after_worker || stopping) {
      close_conn(c);
      continue;
    }
    next_request(*c);
    watch(*c, /*add=*/true);
    process(*c);  // a pipelined request may be here already
  }
}

void HttpServer::Impl::sweep(Clock::time_point now) {
  std::vector<std::shared_ptr<Conn>> expired;
  for (const auto& [fd, c] : conns) {
    if (c->phase != Phase::Dispatched && now >= c->deadline) expired.push_back(c);
  }
  for (auto& c : expired) {
    if (c->fd < 0) continue;
    switch (c->phase) {
      case Phase::Headers:
        if (c->idle && !c->fresh) break;  // a keep-alive wait ran out: nothing owed
        ++n_timeouts;
        if (!c->idle) send_and_forget(c->fd, 408, "the request headers did not arrive in time");
        break;
      case Phase::Body:
        ++n_timeouts;
        send_and_forget(c->fd, 408, "the request body did not arrive in time");
        break;
      case Phase::Writing: ++n_timeouts; break;
      default: break;
    }
    close_conn(c);
  }
  if (accept_paused && now >= accept_paused_until && !stopping) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
    accept_paused = false;
  }
}

void HttpServer::Impl::run() {
  for (int i = 0; i < std::max(1, options.n_threads); ++i) {
    workers.emplace_back([self = shared_from_this()] { self->worker_main(); });
  }
  epoll_event listen_ev{};
  listen_ev.events = EPOLLIN;
  listen_ev.data.fd = listen_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &listen_ev);
  epoll_event wake_ev{};
  wake_ev.events = EPOLLIN;
  wake_ev.data.fd = wake_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &wake_ev);

  bool draining = false;
  Clock::time_point grace_end{};
  bool forced = false;
  auto last_sweep = Clock::now();
  epoll_event events[kMaxEvents];
  for (;;) {
    if (stopping && !draining) {
      draining = true;
      grace_end = Clock::now() + seconds(options.shutdown_grace_s);
      begin_drain();
    }
    if (draining) {
      if (conns.empty()) break;
      if (!forced && Clock::now() >= grace_end) {
        forced = true;
        force_shutdown();
      }
    }
    // Deadlines are swept every 50 ms while there are connections; an idle server sleeps.
    const int n = epoll_wait(epoll_fd, events, kMaxEvents,
                             conns.empty() && !accept_paused && !draining ? 1000 : 50);
    for (int i = 0; i < n; ++i) on_event(events[i]);
    const auto now = Clock::now();
    if (now - last_sweep >= std::chrono::milliseconds(50)) {
      last_sweep = now;
      sweep(now);
    }
  }
  {
    std::lock_guard lock(mu);
    workers_quit = true;
  }
  work_cv.notify_all();
  for (auto& t : workers) t.join();
  workers.clear();
}

void HttpServer::Impl::begin_drain() {
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
  ::close(listen_fd);
  listen_fd = -1;
  std::vector<std::shared_ptr<Conn>> idle;
  for (const auto& [fd, c] : conns) {
    if (c->phase != Phase::Dispatched) idle.push_back(c);
  }
  for (auto& c : idle) close_conn(c);
}

// Requests still being answered: their writes fail and their handlers see the connection
// closed, so the workers come back.
void HttpServer::Impl::force_shutdown() {
  for (const auto& [fd, c] : conns) {
    c->forced = true;
    ::shutdown(fd, SHUT_RDWR);
  }
}

void HttpServer::Impl::on_event(const epoll_event& ev) {
  const int fd = ev.data.fd;
  if (fd == wake_fd) {
    uint64_t v;
    [[maybe_unused]] const ssize_t r = ::read(wake_fd, &v, sizeof v);
    take_returned();
    return;
  }
  if (fd == listen_fd) {
    if (!stopping) accept_all();
    return;
  }
  const auto it = conns.find(fd);
  if (it == conns.end()) return;
  const std::shared_ptr<Conn> c = it->second;
  if (c->phase == Phase::Dispatched) return;
  if ((ev.events & EPOLLOUT) && c->out_off < c->out.size()) {
    if (!flush(*c)) return;
    process(*c);  // the next request, when the answer kept the connection
  }
  if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    if (c->phase == Phase::Writing) {
      if (ev.events & (EPOLLHUP | EPOLLERR)) close_conn(c);
      return;
    }
    on_readable(c);
  }
}

}  // namespace hearth::server
