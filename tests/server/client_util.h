// Client side of the integration tests: JSON posts and Server-Sent Event streams read as they
// arrive, with httplib::Client.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace hearth::test {

struct JsonReply {
  int status = 0;  // 0: no answer at all
  nlohmann::json body;
  std::string raw;
};

JsonReply get_json(httplib::Client& c, const std::string& path, const httplib::Headers& h = {});
JsonReply post_json(httplib::Client& c, const std::string& path, const std::string& body,
                    const httplib::Headers& h = {});
inline JsonReply post_json(httplib::Client& c, const std::string& path, const nlohmann::json& body) {
  return post_json(c, path, body.dump());
}

struct StreamReply {
  int status = 0;
  std::vector<nlohmann::json> events;  // every data event but [DONE]
  bool done = false;                    // "data: [DONE]" came last
  std::string text;                     // the concatenated delta contents / texts
  int n_text_chunks = 0;
};

// Streams every body (with "stream": true added) to `path` at once, each from its own thread and
// connection (made by `connect`); the replies in the order of the bodies.
std::vector<StreamReply> post_streams(const std::function<httplib::Client()>& connect,
                                      const std::string& path,
                                      const std::vector<nlohmann::json>& bodies);

// Each streamed reply got[i] is the whole reply expected[i] to the same request: status 200, [DONE]
// last, the same usage and text.
void expect_streams_match(const std::vector<StreamReply>& got,
                          const std::vector<nlohmann::json>& expected);

// The value of a metric on /metrics (-1 when absent or no answer).
double metric(httplib::Client& c, const std::string& name);
// Waits until `name` reads `value` on /metrics (false after 5 s).
bool wait_metric(httplib::Client& c, const std::string& name, double value);

// Posts `body` and reads the event stream; on_event returning false closes the connection there
// (a client that leaves mid-stream).
StreamReply post_stream(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                        const std::function<bool(const nlohmann::json&)>& on_event = nullptr);

}  // namespace hearth::test
