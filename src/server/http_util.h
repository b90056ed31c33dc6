// Small pieces of the HTTP layer (http.h): header-value helpers, status reasons and response
// heads, socket probes, and the numeric-address and Host/Origin checks. Internal to src/server.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::server::http_detail {

using Clock = std::chrono::steady_clock;

inline Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string lower(std::string_view s);
std::string_view trim_ows(std::string_view s);
bool iequals(std::string_view a, std::string_view b);
// Whether a comma-separated header value (Connection, Expect) holds `token`.
bool has_token(std::string_view value, std::string_view token);
bool is_tchar(unsigned char c);

const char* reason(int status);
// The status line and headers of a response; `length` < 0 means none (chunked or until close).
std::string response_head(int status, std::string_view content_type,
                          const std::map<std::string, std::string>& headers, int64_t length,
                          bool chunked, bool keep_alive);

// Whether the peer has reset the connection or both directions are shut (POLLHUP), without
// waiting and without consuming anything. A FIN alone is not that: see input_closed().
bool socket_dead(int fd);
bool socket_input_closed(int fd);
void set_nodelay(int fd);

// The address family and the bytes of a numeric IP address, for comparing addresses.
struct IpAddr {
  int family = AF_UNSPEC;
  unsigned char bytes[16] = {};
  bool loopback() const;
  bool wildcard() const;
};

std::optional<IpAddr> parse_ip(const std::string& s);
IpAddr to_ip(const sockaddr_storage& ss);
std::string numeric_host(const sockaddr_storage& ss);

// The host name of a Host header value ("name:port", "[v6]:port", "name"), lower case and without
// a trailing dot; nullopt when malformed.
std::optional<std::string> host_name(std::string_view host);

// Whether a Host header names this server: a name in `allowed_hosts` ("*" accepts any), the
// bound address's, "localhost" or a loopback address on a loopback or wildcard address, any
// address on a wildcard one.
bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed_hosts,
                  const std::string& bound_host, const IpAddr& bound_ip);
// Whether `origin` is listed in `cors_origins` ("*" allows any).
bool cors_allowed(std::string_view origin, const std::vector<std::string>& cors_origins);

}  // namespace hearth::server::http_detail
