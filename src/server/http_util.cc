// The HTTP layer's small pieces (http_util.h).
#include "server/http_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.h"

namespace hearth::server::http_detail {

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

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool IpAddr::loopback() const {
  if (family == AF_INET) return bytes[0] == 127;
  static const unsigned char kOne[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return family == AF_INET6 && std::memcmp(bytes, kOne, 16) == 0;
}

bool IpAddr::wildcard() const {
  static const unsigned char kZero[16] = {};
  return family != AF_UNSPEC && std::memcmp(bytes, kZero, family == AF_INET ? 4 : 16) == 0;
}

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

bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed_hosts,
                  const std::string& bound_host, const IpAddr& bound_ip) {
  for (const std::string& h : allowed_hosts) {
    if (h == "*") return true;
  }
  const auto name = host_name(host_header);
  if (!name) return false;
  for (const std::string& h : allowed_hosts) {
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

bool cors_allowed(std::string_view origin, const std::vector<std::string>& cors_origins) {
  for (const std::string& o : cors_origins) {
    if (o == "*" || iequals(o, origin)) return true;
  }
  return false;
}

}  // namespace hearth::server::http_detail
