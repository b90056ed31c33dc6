// Raw HTTP/1.1 over a plain socket, for the tests that must behave as no ordinary client does:
// send a byte at a time, stop half-way, half-close, send a body larger than the server takes, or
// forge headers (Host, Origin).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace hearth::test {

// A connected TCP socket to 127.0.0.1:port, closed with the object.
class RawConn {
 public:
  explicit RawConn(int port);
  ~RawConn();
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Every byte, or false (the server closed or reset the connection).
  bool send(std::string_view data);
  void shutdown_write();
  void close();
  // Waits up to timeout_s for the server to close the connection (reading and dropping what it
  // sends meanwhile); false when it is still open then.
  bool wait_closed(double timeout_s);
  // Bytes read past the end of the last response (the next pipelined one's).
  std::string& pending() { return pending_; }

 private:
  int fd_ = -1;
  std::string pending_;
};

struct RawResponse {
  int status = 0;  // 0: no complete status line and headers within the time
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // de-chunked
  bool complete = false;                       // the whole body arrived
  std::string header(const std::string& lower_name) const;
};

// Reads one response (interim 1xx responses are skipped unless keep_interim) within timeout_s.
RawResponse read_response(RawConn& c, double timeout_s, bool keep_interim = false);

// "METHOD path HTTP/1.1" with Host 127.0.0.1:port, the extra header lines (each ending in
// "\r\n"), a Content-Length when body is not empty, and the body.
std::string raw_request(const std::string& method, const std::string& path, int port,
                        const std::string& extra_headers = "", const std::string& body = "");

}  // namespace hearth::test
