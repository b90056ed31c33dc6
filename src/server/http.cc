// The HTTP/1.1 layer (http.h). One network thread owns every connection while it is read: it
// accepts, reads, parses the request line, headers and body (Content-Length or chunked) under the
// header and body deadlines and the size caps, checks Host, Origin and the admit hook before any
// body byte is read, and writes the short answers it makes itself (400, 403, 404, 408, 413, 431,
// 503, "100 Continue"). A complete request is handed to a worker together with its connection; the
// worker runs the handler and writes the response itself (a write deadline bounds a client that
// does not read), then hands the connection back for its next request. Only the network thread
// closes sockets, so a worker's descriptor stays valid while it holds the connection.
#include "server/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/error.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxChunkLine = 1024;     // a chunk-size line with its extensions
constexpr double kLingerSeconds = 2;       // reading what a refused client still sends
constexpr size_t kLingerBytes = 64 << 20;  // at most this much of it
constexpr int kMaxEvents = 64;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

// Whether a comma-separated header value (Connection, Expect) holds `token`.
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim_ows(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

bool is_tchar(unsigned char c) {
  return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

// The status line and headers of a response; `length` < 0 means none (chunked or until close).
std::string response_head(int status, std::string_view content_type,
                          const std::map<std::string, std::string>& headers, int64_t length,
                          bool chunked, bool keep_alive) {
  std::string h = str_cat("HTTP/1.1 ", status, " ", reason(status), "\r\n");
  if (!content_type.empty()) h += str_cat("Content-Type: ", content_type, "\r\n");
  if (length >= 0) h += str_cat("Content-Length: ", length, "\r\n");
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : headers) h += name + ": " + value + "\r\n";
  h += "\r\n";
  return h;
}

// Whether the peer has reset the connection or both directions are shut (POLLHUP), without
// waiting and without consuming anything. A FIN alone is not that: see input_closed().
bool socket_dead(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool socket_input_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// The address family and the bytes of a numeric IP address, for comparing addresses.
struct IpAddr {
  int family = AF_UNSPEC;
  unsigned char bytes[16] = {};
  bool loopback() const {
    if (family == AF_INET) return bytes[0] == 127;
    static const unsigned char kOne[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return family == AF_INET6 && std::memcmp(bytes, kOne, 16) == 0;
  }
  bool wildcard() const {
    static const unsigned char kZero[16] = {};
    return family != AF_UNSPEC && std::memcmp(bytes, kZero, family == AF_INET ? 4 : 16) == 0;
  }
};

std::optional<IpAddr> parse_ip(const std::string& s) {
  IpAddr a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), a.bytes) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return std::nullopt;
}

IpAddr to_ip(const sockaddr_storage& ss) {
  IpAddr a;
  if (ss.ss_family == AF_INET) {
    a.family = AF_INET;
    std::memcpy(a.bytes, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, 4);
  } else if (ss.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&in6)) {
      a.family = AF_INET;
      std::memcpy(a.bytes, in6.s6_addr + 12, 4);
    } else {
      a.family = AF_INET6;
      std::memcpy(a.bytes, in6.s6_addr, 16);
    }
  }
  return a;
}

std::string numeric_host(const sockaddr_storage& ss) {
  const IpAddr a = to_ip(ss);
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.family != AF_UNSPEC) inet_ntop(a.family, a.bytes, buf, sizeof buf);
  return buf;
}

// The host name of a Host header value ("name:port", "[v6]:port", "name"), lower case and without
// a trailing dot; nullopt when malformed.
std::optional<std::string> host_name(std::string_view host) {
  std::string_view name = host;
  if (name.starts_with('[')) {
    const size_t close = name.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = name.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::nullopt;
    name = name.substr(1, close - 1);
  } else {
    const size_t colon = name.find(':');
    if (colon != std::string_view::npos) {
      if (name.find(':', colon + 1) != std::string_view::npos) return std::nullopt;
      name = name.substr(0, colon);
    }
  }
  if (name.empty()) return std::nullopt;
  std::string out = lower(name);
  if (out.size() > 1 && out.back() == '.') out.pop_back();
  return out;
}

enum class Phase {
  Headers,     // reading a request line and headers (or waiting for a keep-alive request)
  Body,        // reading a body
  Dispatched,  // a worker holds it
  Writing,     // the network thread writes an answer of its own
  Lingering,   // answered and half-closed: reading and dropping what the client still sends
};

enum class Framing { None, Length, Chunked };
enum class ChunkState { Size, Data, DataEnd, Trailer };

struct Route {
  std::map<std::string, HttpHandler> by_method;
};

struct Conn {
  int fd = -1;
  std::string peer;
  Phase phase = Phase::Headers;
  Clock::time_point deadline;
  bool idle = true;  // waiting for the first byte of a request (a keep-alive wait)
  bool fresh = true;  // the connection's first request
  std::string in;    // bytes read and not yet consumed
  size_t scan = 0;   // where to resume the search for the end of the headers
  // The request being read or answered.
  HttpRequest req;
  bool http10 = false;
  bool keep_alive = true;
  Framing framing = Framing::None;
  uint64_t remaining = 0;  // body bytes (Length) or bytes of the current chunk (Chunked) to come
  ChunkState chunk = ChunkState::Size;
  size_t trailer_bytes = 0;
  const HttpHandler* handler = nullptr;
  std::map<std::string, std::string> extra_headers;  // CORS
  // What the network thread writes.
  std::string out;
  size_t out_off = 0;
  bool close_after = false;
  size_t lingered = 0;
  bool peer_eof = false;
  // Worker side: a write failed, or stop() shut the socket down.
  std::atomic<bool> broken{false};
  std::atomic<bool> forced{false};
  bool close_after_worker = false;
};

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  HttpOptions options;
  std::map<std::string, Route> routes;

  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::string bound_host;  // as given to bind(), lower case, without brackets
  IpAddr bound_ip;

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

  ~Impl() {
    for (int fd : {listen_fd, epoll_fd, wake_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  std::string error_json(int status, std::string_view message = {}) const {
    return options.error_body ? options.error_body(status, message) : std::string();
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  // ---- connections -------------------------------------------------------------------------

  void watch(Conn& c, bool add) {
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

  void close_conn(const std::shared_ptr<Conn>& c) {
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

  // A short answer of the network thread's own, written without waiting: the connection is
  // refused (caps) or timed out, and nothing more is owed to it.
  void send_and_forget(int fd, int status, std::string_view message) {
    const std::string body = error_json(status, message);
    std::map<std::string, std::string> h;
    if (status == 503) h["Retry-After"] = "1";
    const std::string r =
        response_head(status, "application/json", h, static_cast<int64_t>(body.size()), false,
                      false) + body;
    [[maybe_unused]] const ssize_t n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void accept_all() {
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

  // At the connection cap: the keep-alive connection idle the longest makes room.
  void evict_idle() {
    std::shared_ptr<Conn> oldest;
    for (const auto& [fd, c] : conns) {
      if (c->phase == Phase::Headers && c->idle && !c->fresh && c->in.empty() &&
          (!oldest || c->deadline < oldest->deadline)) {
        oldest = c;
      }
    }
    if (oldest) close_conn(oldest);
  }

  // Starts waiting for the connection's next request (the keep-alive wait).
  void next_request(Conn& c) {
    c.phase = Phase::Headers;
    c.idle = true;
    c.fresh = false;
    c.scan = 0;
    c.req = HttpRequest{};
    c.framing = Framing::None;
    c.remaining = 0;
    c.chunk = ChunkState::Size;
    c.trailer_bytes = 0;
    c.handler = nullptr;
    c.extra_headers.clear();
    c.close_after = false;
    c.deadline = Clock::now() + seconds(options.idle_timeout_s);
    if (c.in.empty()) c.in.shrink_to_fit();  // an idle connection keeps no buffer
    if (!c.in.empty()) {  // a pipelined request is here already
      c.idle = false;
      c.deadline = Clock::now() + seconds(options.header_timeout_s);
    }
  }

  // Answers from the network thread: an error body for `message` (json), or `body` as it is.
  // With close, the connection then lingers: it is half-closed and what the client still sends is
  // read and dropped for a while, so that the client reads the answer instead of meeting a reset.
  void answer(Conn& c, int status, std::string_view message, bool close,
              std::map<std::string, std::string> headers = {}) {
    const std::string body = status == 204 ? std::string() : error_json(status, message);
    answer_raw(c, status, close, std::move(headers), body,
               body.empty() ? std::string() : std::string("application/json"));
  }

  void answer_raw(Conn& c, int status, bool close, std::map<std::string, std::string> headers,
                  const std::string& body, const std::string& content_type) {
    if (status == 503) headers.emplace("Retry-After", "1");
    for (const auto& h : c.extra_headers) headers.insert(h);
    if (stopping) close = true;
    const bool keep = !close && c.keep_alive;
    c.out.assign(response_head(status, content_type, headers, static_cast<int64_t>(body.size()),
                               false, keep));
    c.out += body;
    c.out_off = 0;
    c.close_after = !keep;
    c.phase = Phase::Writing;
    c.deadline = Clock::now() + seconds(options.write_timeout_s);
    watch(c, false);
    flush(c);
  }

  // Writes what the network thread has to send; false when the connection was closed. An answer
  // fully written either lingers (close) or starts the wait for the next request.
  bool flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch(c, false);  // EPOLLOUT resumes
        return true;
      }
      close_conn(conns.at(c.fd));
      return false;
    }
    c.out.clear();
    c.out_off = 0;
    if (c.phase != Phase::Writing) {  // "100 Continue" while the body is read
      watch(c, false);
      return true;
    }
    if (c.close_after) {
      ::shutdown(c.fd, SHUT_WR);
      c.phase = Phase::Lingering;
      c.deadline = Clock::now() + seconds(kLingerSeconds);
      c.lingered = 0;
      c.in.clear();
    } else {
      next_request(c);
    }
    watch(c, false);
    return true;
  }

  void on_readable(const std::shared_ptr<Conn>& cp) {
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

  // Parses what has been read, request after request (pipelining), until more bytes are needed
  // or the connection is handed to a worker, answered with a close, or closed.
  void process(Conn& c) {
    for (;;) {
      if (c.fd < 0) return;
      if (c.phase == Phase::Headers) {
        if (c.in.empty() || !parse_headers(c)) return;
      } else if (c.phase == Phase::Body) {
        const int status = read_body(c);
        if (status < 0) return;
        if (status == 0) {
          dispatch(c);
        } else {
          if (status == 413 || status == 431) ++n_too_large;
          answer(c, status,
                 status == 413 ? str_cat("the request body is too large (over ",
                                         options.max_body_bytes, " bytes)")
                 : status == 431 ? std::string("the chunked body's trailer is too large")
                                 : std::string("malformed chunked body"),
                 /*close=*/true);
        }
      } else {
        return;
      }
    }
  }

  // Parses the request line and headers once they are all in, then admits the request: false
  // when more bytes are needed, true when the head was consumed (the connection then reads the
  // body, was dispatched, or is being answered).
  bool parse_headers(Conn& c) {
    // Empty lines before a request line are ignored (RFC 9112 2.2).
    size_t skip = 0;
    while (skip < c.in.size() && (c.in[skip] == '\r' || c.in[skip] == '\n')) ++skip;
    if (skip > 0) {
      c.in.erase(0, skip);
      c.scan = 0;
    }
    size_t end = std::string::npos, body_at = 0;
    for (size_t i = c.scan; i < c.in.size(); ++i) {
      if (c.in[i] != '\n') continue;
      if (i + 1 < c.in.size() && c.in[i + 1] == '\n') {
        end = i;
        body_at = i + 2;
        break;
      }
      if (i + 2 < c.in.size() && c.in[i + 1] == '\r' && c.in[i + 2] == '\n') {
        end = i;
        body_at = i + 3;
        break;
      }
    }
    if (end == std::string::npos || end > options.max_header_bytes) {
      c.scan = c.in.size() > 2 ? c.in.size() - 2 : 0;
      if (c.in.size() <= options.max_header_bytes) return false;
      ++n_too_large;
      answer(c, 431, "the request headers are too large", /*close=*/true);
      return true;
    }
    const std::string head = c.in.substr(0, end);
    c.in.erase(0, body_at);
    c.scan = 0;
    if (const int status = parse_head(c, head); status != 0) {
      if (status == 413) ++n_too_large;
      answer(c, status,
             status == 505   ? std::string("only HTTP/1.0 and HTTP/1.1 are spoken here")
             : status == 501 ? std::string("only the chunked transfer encoding is supported")
             : status == 413 ? str_cat("the request body is too large (over ",
                                       options.max_body_bytes, " bytes)")
                             : std::string("malformed request"),
             /*close=*/true);
      return true;
    }
    const bool has_body = c.framing == Framing::Chunked ||
                          (c.framing == Framing::Length && c.remaining > 0);
    if (!admit(c, has_body)) return true;
    if (!has_body) {
      dispatch(c);
      return true;
    }
    c.phase = Phase::Body;
    c.deadline = Clock::now() + seconds(options.body_timeout_s);
    if (!c.http10 && has_token(c.req.header("expect"), "100-continue")) {
      c.out = "HTTP/1.1 100 Continue\r\n\r\n";
      c.out_off = 0;
      flush(c);
    }
    return true;
  }

  // The request line and header fields into c.req; 0, or the status to answer.
  int parse_head(Conn& c, std::string_view head) {
    const size_t eol = head.find('\n');
    std::string_view line = trim_ows(head.substr(0, eol));
    head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 1);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
      return 400;
    }
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (method.empty() || !std::all_of(method.begin(), method.end(), is_tchar)) return 400;
    if (!version.starts_with("HTTP/1.")) return version.starts_with("HTTP/") ? 505 : 400;
    if (version == "HTTP/1.0") {
      c.http10 = true;
    } else if (version == "HTTP/1.1") {
      c.http10 = false;
    } else {
      return 505;
    }
    if (target.empty() || (target[0] != '/' && !(target == "*" && method == "OPTIONS"))) return 400;
    for (const char ch : target) {
      if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) return 400;
    }
    c.req.method = std::string(method);
    c.req.path = std::string(target.substr(0, target.find_first_of("?#")));
    c.req.remote_addr = c.peer;

    std::string content_length;
    bool has_length = false;
    while (!head.empty()) {
      const size_t e = head.find('\n');
      std::string_view field = head.substr(0, e);
      head.remove_prefix(e == std::string_view::npos ? head.size() : e + 1);
      if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
      if (field.empty()) continue;
      if (field[0] == ' ' || field[0] == '\t') return 400;  // obsolete line folding
      const size_t colon = field.find(':');
      if (colon == 0 || colon == std::string_view::npos) return 400;
      const std::string_view name = field.substr(0, colon);
      if (!std::all_of(name.begin(), name.end(), is_tchar)) return 400;
      const std::string key = lower(name);
      const std::string value(trim_ows(field.substr(colon + 1)));
      if (key == "content-length") {
        if (value.empty() || !std::all_of(value.begin(), value.end(), ::isdigit)) return 400;
        if (has_length && value != content_length) return 400;
        has_length = true;
        content_length = value;
      }
      if (key == "host" && c.req.headers.count("host")) return 400;
      auto [it, inserted] = c.req.headers.emplace(key, value);
      if (!inserted && key != "content-length") it->second += ", " + value;
    }
    if (!c.http10 && !c.req.headers.count("host")) return 400;
    const std::string te = c.req.header("transfer-encoding");
    if (!te.empty()) {
      if (has_length) return 400;  // both: a request-smuggling shape
      if (!iequals(trim_ows(te), "chunked")) return 501;
      c.framing = Framing::Chunked;
      c.chunk = ChunkState::Size;
    } else if (has_length) {
      const std::string_view digits = std::string_view(content_length).substr(
          std::min(content_length.find_first_not_of('0'), content_length.size()));
      if (digits.size() > 18) return 413;
      const uint64_t n = digits.empty() ? 0 : std::stoull(std::string(digits));
      if (n > options.max_body_bytes) return 413;
      c.framing = Framing::Length;
      c.remaining = n;
    }
    const std::string connection = c.req.header("connection");
    c.keep_alive = c.http10 ? has_token(connection, "keep-alive") : !has_token(connection, "close");
    return 0;
  }

  bool host_allowed(std::string_view host_header) const {
    for (const std::string& h : options.allowed_hosts) {
      if (h == "*") return true;
    }
    const auto name = host_name(host_header);
    if (!name) return false;
    for (const std::string& h : options.allowed_hosts) {
      if (lower(h) == *name) return true;
    }
    if (*name == bound_host) return true;
    const auto ip = parse_ip(*name);
    if (bound_ip.loopback() || bound_ip.wildcard()) {
      if (*name == "localhost") return true;
      if (ip && ip->loopback()) return true;
    }
    if (ip && bound_ip.wildcard()) return true;  // an address reaches no other site's name
    if (ip && ip->family == bound_ip.family &&
        std::memcmp(ip->bytes, bound_ip.bytes, ip->family == AF_INET ? 4 : 16) == 0) {
      return true;
    }
    return false;
  }

  bool cors_allowed(std::string_view origin) const {
    for (const std::string& o : options.cors_origins) {
      if (o == "*" || iequals(o, origin)) return true;
    }
    return false;
  }

  // Host, Origin, the route and the admit hook, before any body byte is read; false when it
  // answered instead.
  bool admit(Conn& c, bool has_body) {
    const HttpRequest& r = c.req;
    const std::string host = r.header("host");
    if (!host.empty() && !host_allowed(host)) {
      ++n_refused;
      answer(c, 403,
             str_cat("the Host '", host, "' is not this server's (start it with --allow-host "
                     "NAME to accept that name)"),
             has_body);
      return false;
    }
    const std::string origin = r.header("origin");
    bool cross_origin = false;
    if (!origin.empty()) {
      const bool same = !host.empty() && (iequals(origin, "http://" + host) ||
                                          iequals(origin, "https://" + host));
      if (!same) {
        if (!cors_allowed(origin)) {
          ++n_refused;
          answer(c, 403,
                 str_cat("cross-origin request from '", origin, "' refused (start the server "
                         "with --cors ORIGIN to allow it)"),
                 has_body);
          return false;
        }
        cross_origin = true;
        c.extra_headers["Access-Control-Allow-Origin"] = origin;
        c.extra_headers["Vary"] = "Origin";
      }
    }
    const auto route = routes.find(r.path);
    const bool known = route != routes.end() || (r.path == "*" && r.method == "OPTIONS");
    if (!known) {
      answer(c, 404, "", has_body);
      return false;
    }
    if (r.method == "OPTIONS") {  // a CORS preflight, or a client asking what it may do
      std::map<std::string, std::string> h;
      h["Allow"] = "GET, POST, OPTIONS";
      if (cross_origin) {
        h["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS";
        h["Access-Control-Allow-Headers"] = "Authorization, Content-Type";
        h["Access-Control-Max-Age"] = "600";
      }
      answer(c, 204, "", has_body, h);
      return false;
    }
    const auto handler = route->second.by_method.find(r.method);
    if (handler == route->second.by_method.end()) {
      std::string allow;
      for (const auto& [m, h] : route->second.by_method) allow += (allow.empty() ? "" : ", ") + m;
      answer(c, 405, "", has_body, {{"Allow", allow}});
      return false;
    }
    if (options.admit) {
      if (auto refusal = options.admit(r)) {
        answer_raw(c, refusal->status, has_body, refusal->headers, refusal->body,
                   refusal->content_type);
        return false;
      }
    }
    c.handler = &handler->second;
    return true;
  }

  // Moves body bytes from c.in; 0 when the body is complete, -1 when more is needed, else the
  // status to answer.
  int read_body(Conn& c) {
    std::string& body = c.req.body;
    if (c.framing == Framing::Length) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(c.remaining, c.in.size()));
      if (body.empty()) body.reserve(static_cast<size_t>(c.remaining));
      body.append(c.in, 0, n);
      c.in.erase(0, n);
      c.remaining -= n;
      return c.remaining == 0 ? 0 : -1;
    }
    size_t pos = 0;
    int result = -1;
    while (result < 0) {
      if (c.chunk == ChunkState::Data) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(c.remaining, c.in.size() - pos));
        body.append(c.in, pos, n);
        pos += n;
        c.remaining -= n;
        if (c.remaining > 0) break;
        c.chunk = ChunkState::DataEnd;
        continue;
      }
      const size_t eol = c.in.find('\n', pos);
      if (eol == std::string::npos) {
        const size_t limit = c.chunk == ChunkState::Trailer ? options.max_header_bytes : kMaxChunkLine;
        if (c.in.size() - pos > limit) result = c.chunk == ChunkState::Trailer ? 431 : 400;
        break;
      }
      std::string_view line(c.in.data() + pos, eol - pos);
      pos = eol + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (c.chunk == ChunkState::DataEnd) {
        if (!line.empty()) result = 400;
        c.chunk = ChunkState::Size;
      } else if (c.chunk == ChunkState::Size) {
        if (line.size() > kMaxChunkLine) {
          result = 400;
          break;
        }
        const std::string_view hex = trim_ows(line.substr(0, line.find(';')));
        uint64_t size = 0;
        bool ok = !hex.empty() && hex.size() <= 15;
        for (const char ch : hex) {
          const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                        : (ch >= 'a' && ch <= 'f')                   ? ch - 'a' + 10
                        : (ch >= 'A' && ch <= 'F')                   ? ch - 'A' + 10
                                                                     : -1;
          if (d < 0) ok = false;
          size = size * 16 + static_cast<uint64_t>(std::max(d, 0));
        }
        if (!ok) {
          result = 400;
        } else if (size > options.max_body_bytes - std::min(body.size(), options.max_body_bytes)) {
          result = 413;  // known before a byte of that chunk is stored
        } else if (size == 0) {
          c.chunk = ChunkState::Trailer;
        } else {
          c.remaining = size;
          c.chunk = ChunkState::Data;
        }
      } else {  // Trailer: fields are read and dropped; an empty line ends the body
        if (line.empty()) {
          result = 0;
        } else {
          c.trailer_bytes += line.size();
          if (c.trailer_bytes > options.max_header_bytes) result = 431;
        }
      }
    }
    c.in.erase(0, pos);
    return result;
  }

  void dispatch(Conn& c) {
    c.phase = Phase::Dispatched;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
    {
      std::lock_guard lock(mu);
      work.push_back(conns.at(c.fd));
    }
    work_cv.notify_one();
  }

  void take_returned() {
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

  void sweep(Clock::time_point now) {
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

  // ---- workers -----------------------------------------------------------------------------

  void worker_main() {
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

  // Writes all of data, waiting for the socket while it makes progress within the write
  // deadline; false (and the connection marked broken) when it cannot.
  bool send_all(Conn& c, std::string_view data) {
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

  class Sink final : public StreamSink {
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

  void respond(Conn& c) {
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

  // ---- the loop ----------------------------------------------------------------------------

  void run() {
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
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        ::close(listen_fd);
        listen_fd = -1;
        std::vector<std::shared_ptr<Conn>> idle;
        for (const auto& [fd, c] : conns) {
          if (c->phase != Phase::Dispatched) idle.push_back(c);
        }
        for (auto& c : idle) close_conn(c);
      }
      if (draining) {
        if (conns.empty()) break;
        if (!forced && Clock::now() >= grace_end) {
          // Requests still being answered: their writes fail and their handlers see the
          // connection closed, so the workers come back.
          forced = true;
          for (const auto& [fd, c] : conns) {
            c->forced = true;
            ::shutdown(fd, SHUT_RDWR);
          }
        }
      }
      // Deadlines are swept every 50 ms while there are connections; an idle server sleeps.
      const int n = epoll_wait(epoll_fd, events, kMaxEvents,
                               conns.empty() && !accept_paused && !draining ? 1000 : 50);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd) {
          uint64_t v;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd, &v, sizeof v);
          take_returned();
          continue;
        }
        if (fd == listen_fd) {
          if (!stopping) accept_all();
          continue;
        }
        const auto it = conns.find(fd);
        if (it == conns.end()) continue;
        const std::shared_ptr<Conn> c = it->second;
        if (c->phase == Phase::Dispatched) continue;
        if ((events[i].events & EPOLLOUT) && c->out_off < c->out.size()) {
          if (!flush(*c)) continue;
          process(*c);  // the next request, when the answer kept the connection
        }
        if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
          if (c->phase == Phase::Writing) {
            if (events[i].events & (EPOLLHUP | EPOLLERR)) close_conn(c);
            continue;
          }
          on_readable(c);
        }
      }
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
};

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
