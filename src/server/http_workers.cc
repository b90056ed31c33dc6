// The HTTP layer's workers (http_impl.h): each runs the handler of a complete request and writes
// its response, streamed or not, under the write deadline, then hands the connection back to the
// network thread for its next request.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <exception>

#include "server/http_impl.h"

namespace hearth::server {
namespace {

using http_detail::Clock;
using http_detail::Conn;
using http_detail::response_head;
using http_detail::seconds;
using http_detail::socket_dead;
using http_detail::socket_input_closed;

}  // namespace

void HttpServer::Impl::worker_main() {
  for (;;) {
    std::shared_ptr<Conn> c;
    {
      std::unique_lock lock(mu);
      work_cv.wait(lock, [&] { return workers_quit || !work.empty(); });
      if (work.empty()) return;
      c = std::move(work.front());
      work.pop_front();
    }
    respond(*c);
    {
      std::lock_guard lock(mu);
      returned.push_back(std::move(c));
    }
    wake();
  }
}

bool HttpServer::Impl::send_all(Conn& c, std::string_view data) {
  if (c.broken) return false;
  auto last_progress = Clock::now();
  while (!data.empty()) {
    if (c.forced) break;
    const ssize_t n = ::send(c.fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      last_progress = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
    if (Clock::now() - last_progress > seconds(options.write_timeout_s)) {
      ++n_timeouts;
      break;
    }
    pollfd p{c.fd, POLLOUT, 0};
    poll(&p, 1, 100);  // short: stop() may force the connection meanwhile
  }
  if (data.empty()) return true;
  c.broken = true;
  return false;
}

class HttpServer::Impl::Sink final : public StreamSink {
 public:
  Sink(Impl& impl, Conn& c, bool chunked) : impl_(impl), c_(c), chunked_(chunked) {}
  bool write(std::string_view data) override {
    if (data.empty()) return !c_.broken;
    if (!chunked_) return impl_.send_all(c_, data);
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string chunk = size;
    chunk.append(data);
    chunk += "\r\n";
    return impl_.send_all(c_, chunk);
  }
  bool input_closed() override { return c_.broken || socket_input_closed(c_.fd); }

 private:
  Impl& impl_;
  Conn& c_;
  bool chunked_;
};

void HttpServer::Impl::respond(Conn& c) {
  HttpRequest& req = c.req;
  req.is_connection_closed = [&c] { return c.broken || c.forced || socket_dead(c.fd); };
  req.is_input_closed = [&c] { return c.broken || c.forced || socket_input_closed(c.fd); };
  HttpResponse res;
  try {
    res = (*c.handler)(req);
  } catch (...) {
    res = HttpResponse{};
    res.status = 500;
    res.body = error_json(500);
  }
  for (const auto& h : c.extra_headers) res.headers.insert(h);
  if (res.status == 503) res.headers.emplace("Retry-After", "1");
  // A client that has finished sending (half-closed) sends no further request.
  bool keep = c.keep_alive && !stopping && !socket_input_closed(c.fd);
  if (!res.stream) {
    const std::string head = response_head(res.status, res.content_type, res.headers,
                                           static_cast<int64_t>(res.body.size()), false, keep);
    // One write for both when the body is small: one packet instead of two.
    const bool ok = res.body.size() <= 16384 ? send_all(c, head + res.body)
                                             : send_all(c, head) && send_all(c, res.body);
    if (res.on_close) res.on_close();
    c.close_after_worker = !ok || !keep;
    return;
  }
  // HTTP/1.0 has no chunked encoding: its stream ends with the connection.
  const bool chunked = !c.http10;
  if (!chunked) keep = false;
  bool ok = send_all(c, response_head(res.status, res.content_type, res.headers, -1, chunked, keep));
  if (ok) {
    Sink sink(*this, c, chunked);
    try {
      res.stream(sink);
    } catch (const std::exception&) {
      c.broken = true;  // the body is cut short: the client must see the connection end
    }
    ok = !c.broken && (!chunked || send_all(c, "0\r\n\r\n"));
  }
  if (res.on_close) res.on_close();
  c.close_after_worker = !ok || !keep;
}

}  // namespace hearth::server
