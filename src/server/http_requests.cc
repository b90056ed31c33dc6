// The HTTP layer's requests on the network thread (http_impl.h): parsing what has been read in
// turn, admitting a request (Host, Origin, route, admit hook) before its body is read, and the
// short answers the network thread writes itself (400, 403, 404, 405, 413, 431, 503, 204 to
// OPTIONS, "100 Continue").
#include <sys/socket.h>

#include <cerrno>
#include <optional>

#include "core/error.h"
#include "server/http_impl.h"
#include "server/http_parse.h"

namespace hearth::server {
namespace {

using http_detail::ChunkState;
using http_detail::Clock;
using http_detail::Conn;
using http_detail::cors_allowed;
using http_detail::find_head_end;
using http_detail::Framing;
using http_detail::has_token;
using http_detail::HeadEnd;
using http_detail::host_allowed;
using http_detail::iequals;
using http_detail::kLingerSeconds;
using http_detail::parse_head;
using http_detail::Phase;
using http_detail::read_body;
using http_detail::response_head;
using http_detail::seconds;

}  // namespace

void HttpServer::Impl::next_request(Conn& c) {
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

void HttpServer::Impl::answer(Conn& c, int status, std::string_view message, bool close,
                              std::map<std::string, std::string> headers) {
  const std::string body = status == 204 ? std::string() : error_json(status, message);
  answer_raw(c, status, close, std::move(headers), body,
             body.empty() ? std::string() : std::string("application/json"));
}

void HttpServer::Impl::answer_raw(Conn& c, int status, bool close,
                                  std::map<std::string, std::string> headers,
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

bool HttpServer::Impl::flush(Conn& c) {
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

void HttpServer::Impl::process(Conn& c) {
  for (;;) {
    if (c.fd < 0) return;
    if (c.phase == Phase::Headers) {
      if (c.in.empty() || !parse_headers(c)) return;
    } else if (c.phase == Phase::Body) {
      const int status = read_body(c, options);
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

bool HttpServer::Impl::parse_headers(Conn& c) {
  const std::optional<HeadEnd> found = find_head_end(c);
  if (!found || found->end > options.max_header_bytes) {
    c.scan = c.in.size() > 2 ? c.in.size() - 2 : 0;
    if (c.in.size() <= options.max_header_bytes) return false;
    ++n_too_large;
    answer(c, 431, "the request headers are too large", /*close=*/true);
    return true;
  }
  const std::string head = c.in.substr(0, found->end);
  c.in.erase(0, found->body_at);
  c.scan = 0;
  if (const int status = parse_head(c, head, options); status != 0) {
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

bool HttpServer::Impl::admit(Conn& c, bool has_body) {
  const HttpRequest& r = c.req;
  const std::string host = r.header("host");
  if (!host.empty() && !host_allowed(host, options.allowed_hosts, bound_host, bound_ip)) {
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
      if (!cors_allowed(origin, options.cors_origins)) {
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

}  // namespace hearth::server
