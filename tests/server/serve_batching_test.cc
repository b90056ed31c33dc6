// Continuous batching: concurrent clients share the engine's forward passes and still get exactly
// what a lone client gets; requests join a running batch; a prompt continues from a slot's cached
// tokens; a client that leaves hands its slot to the next request in the queue.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "server/client_util.h"
#include "server/server_process.h"

namespace hearth::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Client i: its own prompt (of its own length) and max_tokens; ignore_eos, so every client gets
// exactly max_tokens tokens.
json request(int i) {
  std::string prompt = "client " + std::to_string(i);
  for (int w = 0; w < i; ++w) prompt += " and word " + std::to_string(w);
  return json{
      {"prompt", prompt}, {"max_tokens", 6 + 5 * i}, {"temperature", 0}, {"ignore_eos", true}};
}

TEST(ServeBatching, EightStreamingClientsGetWhatALoneClientGets) {
  constexpr int kClients = 8;
  std::vector<json> expected(kClients);
  {
    // The lone client: one slot, the whole prompt evaluated every time.
    ServerProcess alone(
        {"-m", small_model(), "-c", "160", "--parallel", "1", "--no-cache-prompt", "-t", "1"});
    auto c = alone.client();
    for (int i = 0; i < kClients; ++i) {
      const auto r = post_json(c, "/v1/completions", request(i));
      ASSERT_EQ(r.status, 200) << r.raw;
      expected[i] = r.body;
    }
    EXPECT_EQ(alone.stop(), 0);
  }
  ServerProcess server(
      {"-m", small_model(), "-c", "160", "--parallel", "8", "--prompt-chunk", "4", "-t", "2"});
  std::vector<json> bodies;
  for (int i = 0; i < kClients; ++i) bodies.push_back(request(i));
  const auto got = post_streams([&] { return server.client(); }, "/v1/completions", bodies);
  expect_streams_match(got, expected);
  for (int i = 0; i < kClients && !got[i].events.empty(); ++i) {
    const json& last = got[i].events.back();
    EXPECT_EQ(last["usage"]["completion_tokens"], request(i)["max_tokens"]) << "client " << i;
    EXPECT_EQ(last["choices"][0]["finish_reason"], "length") << "client " << i;
  }
  // Again, one after the other: each prompt now continues from a slot's cache, same answers.
  auto c = server.client();
  for (int i = 0; i < kClients; ++i) {
    const auto r = post_json(c, "/v1/completions", request(i));
    EXPECT_EQ(r.body["choices"][0]["text"], expected[i]["choices"][0]["text"]) << "client " << i;
  }
  EXPECT_GT(metric(c, "hearth_prompt_tokens_cached_total"), 0);
  EXPECT_EQ(metric(c, "hearth_slots_active"), 0);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A request's greedy text and its tokens' log-probabilities (the logits' log-softmax, compared
// as exact doubles) are the same alone (no cache, one slot, one thread), again from the prompt
// cache, and beside three other requests that share its forward passes, with its prompt fed in
// chunks of 4; so are those of a prompt that goes on from its answer, after it. `sparse`: the
// sparse mode's flags.
void expect_server_invariance(const std::string& model, const std::vector<std::string>& sparse) {
  const auto body = [](const std::string& prompt) {
    return json{{"prompt", prompt},
                {"max_tokens", 24},
                {"temperature", 0},
                {"ignore_eos", true},
                {"logprobs", 5}};
  };
  const auto args = [&](std::vector<std::string> a) {
    a.insert(a.end(), sparse.begin(), sparse.end());
    return a;
  };
  const std::string prompt = "the request whose answer must not move: forty-odd bytes";
  const json mine = body(prompt);
  json expected, expected_next;
  // A prompt that goes on from mine's answer, as a chat's next turn does. (Its text may tokenize
  // otherwise than the generated tokens, so the cache may hold none of them for it: which cached
  // tokens a slot reuses is tested in slot_test.cc.)
  json next;
  {
    ServerProcess alone(
        args({"-m", model, "-c", "256", "--parallel", "1", "--no-cache-prompt", "-t", "1"}));
    auto c = alone.client();
    const auto r = post_json(c, "/v1/completions", mine);
    ASSERT_EQ(r.status, 200) << r.raw;
    expected = r.body["choices"][0];
    ASSERT_EQ(expected["logprobs"]["token_logprobs"].size(), 24u) << r.raw;
    next = body(prompt + expected["text"].get<std::string>() + " and then");
    const auto rn = post_json(c, "/v1/completions", next);
    ASSERT_EQ(rn.status, 200) << rn.raw;
    expected_next = rn.body["choices"][0];
    EXPECT_EQ(alone.stop(), 0);
  }
  const auto expect_same = [&](const JsonReply& r, const json& want, const std::string& what) {
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["choices"][0]["text"], want["text"]) << what;
    EXPECT_EQ(r.body["choices"][0]["logprobs"], want["logprobs"]) << what;
  };
  ServerProcess server(
      args({"-m", model, "-c", "256", "--parallel", "4", "--prompt-chunk", "4", "-t", "2"}));
  auto c = server.client();
  expect_same(post_json(c, "/v1/completions", mine), expected, "a fresh slot");
  expect_same(post_json(c, "/v1/completions", mine), expected, "from the prompt cache");
  EXPECT_GT(metric(c, "hearth_prompt_tokens_cached_total"), 0);
  expect_same(post_json(c, "/v1/completions", next), expected_next,
              "going on from the answer in the cache");
  const std::vector<json> bodies = {body("another request, longer than the first one by far"), mine,
                                    body("a third"), body("and a fourth request of text")};
  std::vector<JsonReply> got(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) {
    threads.emplace_back([&, i] {
      auto ci = server.client();
      got[i] = post_json(ci, "/v1/completions", bodies[i]);
    });
  }
  for (auto& t : threads) t.join();
  expect_same(got[1], expected, "beside three other requests");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Batch invariance in predictor mode. The high threshold makes the predictors skip neurons that
// fire, so that a prompt computed any other way gives other text.
TEST(ServeBatching, SparseAnswersDoNotDependOnBatchingOrCache) {
  const std::string model =
      synth_model("sparse", {"--n-embd", "128", "--n-layer", "2", "--n-ff", "512", "--n-head", "4",
                             "--n-head-kv", "2", "--n-vocab", "300", "--n-ctx", "256", "--type",
                             "q8_0", "--sparsity", "0.7"});
  expect_server_invariance(model, {"--sparse", "predictor", "--sparse-threshold", "4"});
}

// The same with PowerInfer's dense prefill before sparse decode steps: the prompt's chunks run
// dense however small the scheduler cuts them, and a prompt continues only from the prompt tokens
// a slot's cache holds (its generated ones were decode steps).
TEST(ServeBatching, DensePromptAnswersDoNotDependOnBatchingOrCache) {
  const std::string model =
      synth_model("sparse", {"--n-embd", "128", "--n-layer", "2", "--n-ff", "512", "--n-head", "4",
                             "--n-head-kv", "2", "--n-vocab", "300", "--n-ctx", "256", "--type",
                             "q8_0", "--sparsity", "0.7"});
  expect_server_invariance(model,
                           {"--sparse", "predictor", "--sparse-threshold", "4", "--dense-prompt"});
}

// The same in threshold mode on a model-wide F16 file 512 wide, whose decode steps read
// input-major copies (in the dense products' lane order) while prompts read the file's matrices.
TEST(ServeBatching, ModelWideThresholdAnswersDoNotDependOnBatchingOrCache) {
  const std::string model = synth_model(
      "wide", {"--n-embd", "512", "--n-layer", "2", "--n-ff", "1024", "--n-head", "8",
               "--n-head-kv", "4", "--n-vocab", "300", "--n-ctx", "256", "--type", "f16"});
  const std::string dir = temp_dir();
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += "the cat " + std::to_string(i % 17) + " sat on a mat and saw " + std::to_string(i % 5) +
            " birds. ";
  }
  write_file(dir + "/calib.txt", text);
  const std::string calibrated = dir + "/wide-mw.gguf";
  const auto r = run_hearth({"calibrate", "-m", model, "-f", dir + "/calib.txt", "-o", calibrated,
                             "--sparsity", "0.5", "--layer-groups", "1", "--search-tokens", "64",
                             "--tokens", "256", "--window", "64", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_server_invariance(calibrated, {"--sparse", "threshold"});
}

// While one long reply runs, four short ones join its batch: they take far fewer engine steps than
// they have tokens, and the long reply keeps going.
TEST(ServeBatching, RequestsJoinARunningBatch) {
  ServerProcess server({"-m", slow_model(), "-c", "2048", "--parallel", "5", "-t", "2"});
  std::atomic<bool> streaming{false}, leave{false};
  std::thread long_reply([&] {
    auto c = server.client();
    post_stream(c, "/v1/completions", {{"prompt", "long"}, {"ignore_eos", true}, {"stream", true}},
                [&](const json&) {
                  streaming = true;
                  return !leave;
                });
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto c = server.client();
  const double steps0 = metric(c, "hearth_engine_steps_total");
  std::vector<std::thread> threads;
  std::vector<JsonReply> got(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto ci = server.client();
      got[i] = post_json(
          ci, "/v1/completions",
          json{{"prompt", "short " + std::to_string(i)}, {"max_tokens", 24}, {"ignore_eos", true}});
    });
  }
  for (auto& t : threads) t.join();
  const double steps = metric(c, "hearth_engine_steps_total") - steps0;
  for (const auto& r : got) {
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 24);
  }
  EXPECT_EQ(metric(c, "hearth_slots_active"), 1) << "the long reply ended early";
  // Unbatched, the 96 short tokens alone would take 96 steps (plus the long reply's).
  EXPECT_LT(steps, 60) << "the short requests were not batched together";
  leave = true;
  long_reply.join();
  EXPECT_TRUE(wait_metric(c, "hearth_slots_active", 0));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServeBatching, ClientLeavingHandsItsSlotToTheQueue) {
  ServerProcess server({"-m", slow_model(), "-c", "2048", "--parallel", "1", "-t", "1"});
  std::atomic<bool> streaming{false}, leave{false};
  std::thread first([&] {  // holds the only slot until told to leave
    auto c = server.client();
    post_stream(c, "/v1/completions", {{"prompt", "a"}, {"ignore_eos", true}, {"stream", true}},
                [&](const json&) {
                  streaming = true;
                  while (!leave) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  return false;
                });
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  JsonReply queued;
  Clock::time_point answered;
  std::thread second([&] {
    auto c = server.client();
    queued = post_json(c, "/v1/completions",
                       json{{"prompt", "b"}, {"max_tokens", 4}, {"ignore_eos", true}});
    answered = Clock::now();
  });
  auto c = server.client();
  ASSERT_TRUE(wait_metric(c, "hearth_queue_length", 1));
  EXPECT_EQ(metric(c, "hearth_slots_active"), 1);
  const auto left = Clock::now();
  leave = true;
  first.join();
  second.join();
  EXPECT_EQ(queued.status, 200) << queued.raw;
  EXPECT_EQ(queued.body["usage"]["completion_tokens"], 4);
  EXPECT_LT(std::chrono::duration<double>(answered - left).count(), 2.0)
      << "the slot of the client that left was not handed on";
  EXPECT_EQ(metric(c, "hearth_queue_length"), 0);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace hearth::test
