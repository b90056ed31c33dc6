// Slots and the queue under load: concurrent streaming clients all finish with the answers a lone
// client gets, and a client that leaves, streaming or not, frees its slot at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/client_util.h"
#include "server/server_process.h"

namespace hearth::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

TEST(ServeConcurrency, EightStreamingClientsOnThreeSlots) {
  ServerProcess server(
      {"-m", small_model(), "-c", "128", "--parallel", "3", "--queue", "16", "-t", "1"});
  constexpr int kClients = 8;
  auto request = [](int i) {
    return json{{"prompt", "client " + std::to_string(i) + " says"}, {"max_tokens", 20},
                {"temperature", 0}};
  };
  // What each client must get: its prompt answered alone.
  std::vector<json> expected(kClients);
  {
    auto c = server.client();
    for (int i = 0; i < kClients; ++i) {
      const auto r = post_json(c, "/v1/completions", request(i));
      ASSERT_EQ(r.status, 200) << r.raw;
      expected[i] = r.body;
    }
  }
  std::vector<json> bodies;
  for (int i = 0; i < kClients; ++i) bodies.push_back(request(i));
  const auto got = post_streams([&] { return server.client(); }, "/v1/completions", bodies);
  expect_streams_match(got, expected);
  auto c = server.client();
  EXPECT_EQ(metric(c, "hearth_requests_total"), 2 * kClients);
  EXPECT_TRUE(wait_metric(c, "hearth_slots_active", 0));
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServeConcurrency, ClientLeavingMidStreamFreesItsSlot) {
  ServerProcess server({"-m", slow_model(), "-c", "2048", "--parallel", "1", "-t", "1"});
  auto c = server.client();
  int seen = 0;
  const auto s = post_stream(c, "/v1/completions",
                             {{"prompt", "go"}, {"ignore_eos", true}, {"stream", true}},
                             [&](const json&) { return ++seen < 4; });
  EXPECT_FALSE(s.done);
  const auto t0 = Clock::now();
  const auto r = post_json(c, "/v1/completions", json{{"prompt", "next"}, {"max_tokens", 4}});
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(waited, 1.0) << "the slot of the client that left was not freed";
  // The abandoned reply stopped within a few tokens of the client leaving.
  EXPECT_LT(metric(c, "hearth_tokens_generated_total"), 200);
  // The worker leaves the slot just after it hands over the last answer.
  EXPECT_TRUE(wait_metric(c, "hearth_slots_active", 0));
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServeConcurrency, ClientLeavingANonStreamingRequestFreesItsSlot) {
  ServerProcess server({"-m", slow_model(), "-c", "2048", "--parallel", "1", "-t", "1"});
  auto c = server.client();
  // What a full-context reply costs when nobody leaves: the time the slot would stay taken.
  const auto t_full = Clock::now();
  const auto full = post_json(c, "/v1/completions", json{{"prompt", "go"}, {"ignore_eos", true}});
  ASSERT_EQ(full.status, 200) << full.raw;
  const double full_s = std::chrono::duration<double>(Clock::now() - t_full).count();
  const int full_tokens = full.body["usage"]["completion_tokens"];
  {
    // This client gives up long before its reply is complete and closes the connection.
    auto leaving = server.client();
    leaving.set_read_timeout(0, 300'000);
    const std::string body = json{{"prompt", "go"}, {"ignore_eos", true}}.dump();
    EXPECT_FALSE(leaving.Post("/v1/completions", body, "application/json"));
  }
  const auto t0 = Clock::now();
  const auto r = post_json(c, "/v1/completions", json{{"prompt", "next"}, {"max_tokens", 4}});
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(waited, std::min(1.0, full_s / 2)) << "the slot of the client that left was not freed "
                                               << "(a full reply takes " << full_s << " s)";
  // The abandoned reply was cut short: one left to run to the end of the context would have made
  // full_tokens (its rate, and so how far it got, depends on this machine and its load; that the
  // slot came free in time is checked above).
  const double abandoned = metric(c, "hearth_tokens_generated_total") - full_tokens - 4;
  EXPECT_LT(abandoned, full_tokens) << "a full reply took " << full_s << " s";
  EXPECT_TRUE(wait_metric(c, "hearth_slots_active", 0));
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServeConcurrency, FullQueueAnswers503AndShutdownEndsEveryRequest) {
  ServerProcess server({"-m", slow_model(), "-c", "2048", "--parallel", "1", "--queue", "1", "-t", "1"});
  std::atomic<bool> streaming{false};
  StreamReply a;
  std::thread ta([&] {  // holds the only slot until the server stops
    auto c = server.client();
    a = post_stream(c, "/v1/completions", {{"prompt", "a"}, {"ignore_eos", true}, {"stream", true}},
                    [&](const json&) { return streaming = true; });
  });
  auto c = server.client();
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  JsonReply b;
  std::thread tb([&] {  // waits in the queue
    auto cb = server.client();
    b = post_json(cb, "/v1/completions", json{{"prompt", "b"}, {"max_tokens", 2}});
  });
  ASSERT_TRUE(wait_metric(c, "hearth_queue_length", 1));
  const auto full = post_json(c, "/v1/completions", json{{"prompt", "c"}, {"max_tokens", 2}});
  EXPECT_EQ(full.status, 503) << full.raw;
  EXPECT_EQ(full.body["error"]["code"], 503) << full.raw;
  EXPECT_EQ(metric(c, "hearth_requests_rejected_total"), 1);
  // SIGTERM while one request generates and one waits: both are answered, the exit is clean.
  EXPECT_EQ(server.stop(), 0) << server.log();
  ta.join();
  tb.join();
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.events.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b.status, 503) << b.raw;
}

}  // namespace
}  // namespace hearth::test
