#include "server/client_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

namespace hearth::test {
namespace {

JsonReply to_reply(const httplib::Result& r) {
  JsonReply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.body = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

// The text one chunk adds: a chat delta's content or a completion's text.
std::string chunk_text(const nlohmann::json& e) {
  if (!e.contains("choices") || e["choices"].empty()) return "";
  const auto& c = e["choices"][0];
  if (c.contains("delta")) return c["delta"].value("content", "");
  return c.value("text", "");
}

}  // namespace

JsonReply get_json(httplib::Client& c, const std::string& path, const httplib::Headers& h) {
  return to_reply(c.Get(path.c_str(), h));
}

JsonReply post_json(httplib::Client& c, const std::string& path, const std::string& body,
                    const httplib::Headers& h) {
  return to_reply(c.Post(path.c_str(), h, body, "application/json"));
}

std::vector<StreamReply> post_streams(const std::function<httplib::Client()>& connect,
                                      const std::string& path,
                                      const std::vector<nlohmann::json>& bodies) {
  std::vector<StreamReply> got(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) {
    threads.emplace_back([&, i] {
      auto c = connect();
      nlohmann::json body = bodies[i];
      body["stream"] = true;
      got[i] = post_stream(c, path, body);
    });
  }
  for (auto& t : threads) t.join();
  return got;
}

void expect_streams_match(const std::vector<StreamReply>& got,
                          const std::vector<nlohmann::json>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    EXPECT_EQ(got[i].status, 200);
    EXPECT_TRUE(got[i].done);
    ASSERT_FALSE(got[i].events.empty());
    EXPECT_EQ(got[i].events.back()["usage"], expected[i]["usage"]);
    EXPECT_EQ(got[i].text, expected[i]["choices"][0]["text"]);
  }
}

double metric(httplib::Client& c, const std::string& name) {
  const auto r = c.Get("/metrics");
  if (!r) return -1;
  std::smatch m;
  const std::regex re("\n" + name + " ([0-9.e+-]+)\n");
  return std::regex_search(r->body, m, re) ? std::stod(m[1]) : -1;
}

bool wait_metric(httplib::Client& c, const std::string& name, double value) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (metric(c, name) != value) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

StreamReply post_stream(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                        const std::function<bool(const nlohmann::json&)>& on_event) {
  StreamReply out;
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (!event.starts_with("data: ")) continue;  // an SSE comment
      if (event == "data: [DONE]") {
        out.done = true;
        continue;
      }
      EXPECT_FALSE(out.done) << "an event after [DONE]";
      out.events.push_back(nlohmann::json::parse(event.substr(6), nullptr, false));
      const std::string t = chunk_text(out.events.back());
      out.text += t;
      out.n_text_chunks += !t.empty();
      if (on_event && !on_event(out.events.back())) return false;
    }
    return true;
  };
  c.send(req);
  return out;
}

}  // namespace hearth::test
