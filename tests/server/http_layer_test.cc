// The HTTP layer (src/server/http.h) in-process, without a model: framing (chunked bodies,
// pipelining, HTTP/1.0), what it refuses and with which status, its deadlines, and stop().
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "server/http.h"
#include "server/openai.h"
#include "server/raw_http.h"

namespace hearth::test {
namespace http_layer {

using server::HttpOptions;
using server::HttpRequest;
using server::HttpResponse;
using server::HttpServer;
using server::StreamSink;
using Clock = std::chrono::steady_clock;

double elapsed(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// An HttpServer on a free loopback port, serving from its own thread.
class Served {
 public:
  explicit Served(HttpOptions o = {}) {
    o.error_body = [](int status, std::string_view message) {
      return server::default_error_body(status, message);
    };
    http_ = std::make_unique<HttpServer>(o);
    http_->post("/echo", [](const HttpRequest& r) {
      HttpResponse res;
      res.content_type = "text/plain";
      res.body = r.body;
      return res;
    });
    http_->get("/hello", [](const HttpRequest&) {
      HttpResponse res;
      res.body = "{\"hello\":1}";
      return res;
    });
    http_->get("/stream", [](const HttpRequest&) {
      HttpResponse res;
      res.content_type = "text/plain";
      res.stream = [](StreamSink& sink) {
        for (int i = 0; i < 3; ++i) sink.write("part" + std::to_string(i) + ";");
      };
      return res;
    });
    // Writes until the client is gone, recording how long that took to be noticed.
    http_->get("/flood", [this](const HttpRequest&) {
      HttpResponse res;
      res.content_type = "text/plain";
      res.stream = [this](StreamSink& sink) {
        const std::string block(64 << 10, 'x');
        const auto t0 = Clock::now();
        while (sink.write(block)) {
        }
        flood_s_ = elapsed(t0);
      };
      return res;
    });
    // Waits for the client to leave (as a non-streaming completion does between tokens).
    http_->get("/wait", [this](const HttpRequest& r) {
      ++waiting_;
      while (!r.connection_closed()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return HttpResponse{};
    });
    port_ = http_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { http_->serve(); });
  }
  ~Served() { stop(); }
  // stop(), and how long serve() took to return.
  double stop() {
    if (!thread_.joinable()) return 0;
    const auto t0 = Clock::now();
    http_->stop();
    thread_.join();
    return elapsed(t0);
  }
  int port() const { return port_; }
  HttpServer& http() { return *http_; }
  std::atomic<double> flood_s_{-1};
  std::atomic<int> waiting_{0};

 private:
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  std::thread thread_;
};

RawResponse round_trip(int port, const std::string& request, double timeout_s = 5) {
  RawConn c(port);
  EXPECT_TRUE(c.send(request));
  return read_response(c, timeout_s);
}

TEST(HttpLayer, ChunkedBodyWithExtensionsAndTrailers) {
  Served s;
  const RawResponse r = round_trip(
      s.port(), "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                "5;ext=1\r\nhello\r\n1\r\n \r\nB\r\nworld, more\r\n0\r\nX-Trailer: t\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello world, more");
}

TEST(HttpLayer, PipelinedRequestsAreAnsweredInOrder) {
  Served s;
  RawConn c(s.port());
  ASSERT_TRUE(c.send("GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n"
                     "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc"
                     "GET /nothing HTTP/1.1\r\nHost: localhost\r\n\r\n"
                     "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nde"));
  const RawResponse a = read_response(c, 5);
  const RawResponse b = read_response(c, 5);
  const RawResponse n = read_response(c, 5);
  const RawResponse d = read_response(c, 5);
  EXPECT_EQ(a.body, "{\"hello\":1}");
  EXPECT_EQ(b.body, "abc");
  EXPECT_EQ(n.status, 404);
  EXPECT_EQ(d.body, "de");
}

TEST(HttpLayer, MalformedAndUnsupportedRequests) {
  Served s;
  const int p = s.port();
  EXPECT_EQ(round_trip(p, "GARBAGE\r\n\r\n").status, 400);
  EXPECT_EQ(round_trip(p, "GET /hello HTTP/1.1\r\n\r\n").status, 400);  // no Host
  EXPECT_EQ(round_trip(p, "GET /hello HTTP/2.0\r\nHost: localhost\r\n\r\n").status, 505);
  EXPECT_EQ(round_trip(p, "GET /hello HTTP/1.1\r\nHost: localhost\r\n folded\r\n\r\n").status, 400);
  EXPECT_EQ(round_trip(p, "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
                .status,
            400);
  EXPECT_EQ(round_trip(p, "POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n").status,
            501);
  EXPECT_EQ(round_trip(p, "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
                        "Content-Length: 3\r\n\r\nabc")
                .status,
            400);
  EXPECT_EQ(round_trip(p, "POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "zz\r\n")
                .status,
            400);
  const RawResponse wrong = round_trip(p, "POST /hello HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\nx");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.header("allow"), "GET");
  EXPECT_EQ(round_trip(p, "GET /hello HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(20000, 'a') +
                            "\r\n\r\n")
                .status,
            431);
  EXPECT_EQ(round_trip(p, "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n").status,
            413);
  EXPECT_EQ(round_trip(p, "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                        "99999999999999999999999999\r\n\r\n")
                .status,
            413);
  // And the server is still fine.
  EXPECT_EQ(round_trip(p, "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n").status, 200);
  EXPECT_GE(s.http().stats().too_large_total, 3);
}

TEST(HttpLayer, Http10StreamEndsWithTheConnection) {
  Served s;
  const RawResponse r = round_trip(s.port(), "GET /stream HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.body, "part0;part1;part2;");
  EXPECT_EQ(r.header("transfer-encoding"), "");
  const RawResponse chunked = round_trip(s.port(), "GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(chunked.body, "part0;part1;part2;");
  EXPECT_EQ(chunked.header("transfer-encoding"), "chunked");
}

TEST(HttpLayer, BodyDeadlineCountsDrippingBytes) {
  HttpOptions o;
  o.body_timeout_s = 0.5;
  Served s(o);
  RawConn c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n"));
  const auto t0 = Clock::now();
  bool closed = false;
  for (int i = 0; i < 30 && !closed; ++i) {  // a byte every 50 ms: never stalls, never finishes
    closed = !c.send("x");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(closed || c.wait_closed(1.0));
  EXPECT_LT(elapsed(t0), 1.2);
  EXPECT_GE(s.http().stats().timeouts_total, 1);
}

TEST(HttpLayer, WriteDeadlineDropsAClientThatDoesNotRead) {
  HttpOptions o;
  o.write_timeout_s = 0.3;
  Served s(o);
  RawConn c(s.port());
  int small = 4096;
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(c.send("GET /flood HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  for (int i = 0; i < 300 && s.flood_s_ < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(s.flood_s_, 0.3) << "the stream did not notice the client that does not read";
  EXPECT_LT(s.flood_s_, 2.0);
}

TEST(HttpLayer, StopClosesSlowConnectionsAndForcesHandlersAfterTheGrace) {
  HttpOptions o;
  o.shutdown_grace_s = 0.3;
  Served s(o);
  RawConn drip(s.port());
  ASSERT_TRUE(drip.send("GET /hello HTTP/1.1\r\nHo"));
  RawConn waiting(s.port());
  ASSERT_TRUE(waiting.send("GET /wait HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  for (int i = 0; i < 200 && s.waiting_ == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(s.waiting_, 1);
  const double took = s.stop();
  EXPECT_GE(took, 0.25) << "the handler did not get its grace";
  EXPECT_LT(took, 1.5);
  EXPECT_TRUE(drip.wait_closed(1));
  EXPECT_TRUE(waiting.wait_closed(1));
}

}  // namespace http_layer
}  // namespace hearth::test
