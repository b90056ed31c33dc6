#include "server/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>

namespace hearth::test {
namespace {

using RawClock = std::chrono::steady_clock;

std::string lower_ascii(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Reads into buf until it holds `need` bytes past `from`, or a "\r\n" after `from` when need is
// 0; false at the deadline or the end of the stream (eof then set).
bool fill(int fd, std::string& buf, size_t from, size_t need, RawClock::time_point deadline,
          bool& eof) {
  for (;;) {
    if (need > 0 ? buf.size() >= from + need : buf.find("\r\n", from) != std::string::npos) {
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RawClock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100))) <= 0) continue;
    char tmp[65536];
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      eof = true;
      return false;
    }
    buf.append(tmp, static_cast<size_t>(n));
  }
}

}  // namespace

RawConn::RawConn(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  if (fd_ >= 0) {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
}

RawConn::~RawConn() { close(); }

bool RawConn::send(std::string_view data) {
  while (!data.empty()) {
    if (fd_ < 0) return false;
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void RawConn::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void RawConn::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConn::wait_closed(double timeout_s) {
  const auto deadline = RawClock::now() + std::chrono::duration_cast<RawClock::duration>(
                                              std::chrono::duration<double>(timeout_s));
  while (fd_ >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RawClock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100))) <= 0) continue;
    char tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
  return true;
}

std::string RawResponse::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

RawResponse read_response(RawConn& c, double timeout_s, bool keep_interim) {
  const auto deadline = RawClock::now() + std::chrono::duration_cast<RawClock::duration>(
                                              std::chrono::duration<double>(timeout_s));
  RawResponse r;
  std::string& buf = c.pending();
  bool eof = false;
  for (;;) {
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      const size_t before = buf.size();
      if (!fill(c.fd(), buf, before, 1, deadline, eof)) return r;
    }
    const std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);
    RawResponse next;
    size_t pos = head.find("\r\n");
    const std::string status_line = head.substr(0, pos);
    if (status_line.size() < 12) return r;
    next.status = std::atoi(status_line.c_str() + 9);
    while (pos != std::string::npos && pos < head.size()) {
      const size_t e = head.find("\r\n", pos + 2);
      const std::string line = head.substr(pos + 2, e == std::string::npos ? std::string::npos : e - pos - 2);
      pos = e;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      next.headers[lower_ascii(line.substr(0, colon))] = line.substr(v);
    }
    r = std::move(next);
    if (r.status >= 100 && r.status < 200 && !keep_interim) continue;
    break;
  }
  if (r.status == 204 || (r.status >= 100 && r.status < 200)) {
    r.complete = true;
    return r;
  }
  if (lower_ascii(r.header("transfer-encoding")) == "chunked") {
    for (;;) {
      if (!fill(c.fd(), buf, 0, 0, deadline, eof)) return r;
      const size_t eol = buf.find("\r\n");
      const size_t size = std::strtoul(buf.substr(0, eol).c_str(), nullptr, 16);
      buf.erase(0, eol + 2);
      if (size == 0) {
        r.complete = true;
        return r;
      }
      if (!fill(c.fd(), buf, 0, size + 2, deadline, eof)) return r;
      r.body.append(buf, 0, size);
      buf.erase(0, size + 2);
    }
  }
  const std::string length = r.header("content-length");
  if (!length.empty()) {
    const size_t n = std::strtoul(length.c_str(), nullptr, 10);
    r.complete = fill(c.fd(), buf, 0, n, deadline, eof);
    r.body = buf.substr(0, n);
    buf.erase(0, std::min(n, buf.size()));
    return r;
  }
  // Until the connection ends.
  while (fill(c.fd(), buf, 0, buf.size() + 1, deadline, eof)) {
  }
  r.body = buf;
  buf.clear();
  r.complete = eof;
  return r;
}

std::string raw_request(const std::string& method, const std::string& path, int port,
                        const std::string& extra_headers, const std::string& body) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                  "\r\n" + extra_headers;
  if (!body.empty()) r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return r + "\r\n" + body;
}

}  // namespace hearth::test
