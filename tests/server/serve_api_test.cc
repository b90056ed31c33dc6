// hearth serve driven over HTTP as an OpenAI client would: every endpoint, streaming against
// non-streaming, stop strings, and the error answers (status and OpenAI error body).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/test_util.h"
#include "server/client_util.h"
#include "server/server_process.h"

namespace hearth::test {
namespace {

using nlohmann::json;

class ServeApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"-m", small_model(), "-c", "128", "--parallel", "2", "-t", "1"});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->stop(), 0) << "SIGTERM must end the server cleanly\n" << server_->log();
    delete server_;
    server_ = nullptr;
  }
  httplib::Client client() { return server_->client(); }
  static json chat(const std::string& content, int max_tokens) {
    return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens},
            {"temperature", 0}};
  }
  static ServerProcess* server_;
};
ServerProcess* ServeApi::server_ = nullptr;

void expect_error(const JsonReply& r, int status, const std::string& needle = "") {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  EXPECT_EQ(r.body["error"]["code"], status) << r.raw;
  EXPECT_TRUE(r.body["error"]["type"].is_string()) << r.raw;
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.raw;
}

TEST_F(ServeApi, HealthModelsAndMetrics) {
  auto c = client();
  const auto h = get_json(c, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body["status"], "ok");
  const auto m = get_json(c, "/v1/models");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.body["object"], "list");
  EXPECT_EQ(m.body["data"][0]["id"], "small.gguf");
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (const char* name : {"hearth_requests_total ", "hearth_tokens_generated_total ",
                           "hearth_tokens_per_second ", "hearth_queue_length 0",
                           "hearth_slots_active ", "hearth_ffn_sparsity "}) {
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name << "\n" << metrics->body;
  }
}

TEST_F(ServeApi, ChatCompletionReportsUsageAndFinishReason) {
  auto c = client();
  const auto r = post_json(c, "/v1/chat/completions", chat("hello", 8));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "chat.completion");
  const auto& choice = r.body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_TRUE(choice["message"]["content"].is_string());
  const auto& u = r.body["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(u["completion_tokens"].get<int>(), 8);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  if (choice["finish_reason"] == "length") {
    EXPECT_EQ(u["completion_tokens"], 8);
  } else {
    EXPECT_EQ(choice["finish_reason"], "stop");
  }
}

// logprobs: one entry per generated token, each the log-probability of that token with the most
// likely alternatives first; at temperature 0 the token is the most likely one.
TEST_F(ServeApi, ChatLogprobsDescribeEveryToken) {
  auto c = client();
  json body = chat("hello", 8);
  body["temperature"] = 0;
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  const auto r = post_json(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& content = r.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r.body["usage"]["completion_tokens"].get<size_t>()) << r.raw;
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    EXPECT_EQ(e["logprob"], e["top_logprobs"][0]["logprob"]) << "greedy takes the most likely";
    EXPECT_EQ(e["token"], e["top_logprobs"][0]["token"]);
    EXPECT_GE(e["top_logprobs"][0]["logprob"].get<double>(),
              e["top_logprobs"][1]["logprob"].get<double>());
  }
  body.erase("logprobs");
  const auto plain = post_json(c, "/v1/chat/completions", body);
  EXPECT_EQ(plain.status, 400) << "top_logprobs without logprobs";
  body.erase("top_logprobs");
  const auto none = post_json(c, "/v1/chat/completions", body);
  ASSERT_EQ(none.status, 200);
  EXPECT_TRUE(none.body["choices"][0]["logprobs"].is_null());
}

// A stream's chunks carry the same log-probabilities, in order, as the whole answer.
TEST_F(ServeApi, StreamedLogprobsMatchTheWholeAnswer) {
  auto c = client();
  const json body = {{"prompt", "once"}, {"max_tokens", 10}, {"temperature", 0},
                     {"ignore_eos", true}, {"logprobs", 2}};
  const auto whole = post_json(c, "/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const auto streamed = post_streams([&] { return client(); }, "/v1/completions", {body});
  ASSERT_EQ(streamed.size(), 1u);
  json tokens = json::array(), lps = json::array(), offsets = json::array();
  for (const json& e : streamed[0].events) {
    const json& lp = e["choices"][0]["logprobs"];
    if (!lp.is_object()) continue;
    for (size_t i = 0; i < lp["tokens"].size(); ++i) {
      tokens.push_back(lp["tokens"][i]);
      lps.push_back(lp["token_logprobs"][i]);
      offsets.push_back(lp["text_offset"][i]);
    }
  }
  const json& want = whole.body["choices"][0]["logprobs"];
  EXPECT_EQ(tokens, want["tokens"]);
  EXPECT_EQ(lps, want["token_logprobs"]);
  EXPECT_EQ(offsets, want["text_offset"]);
  EXPECT_EQ(tokens.size(), 10u);
}

TEST_F(ServeApi, SeededSamplingIsReproducible) {
  auto c = client();
  const json body = {{"prompt", "once upon"}, {"max_tokens", 12}, {"temperature", 0.9}, {"seed", 3}};
  const auto a = post_json(c, "/v1/completions", body);
  const auto b = post_json(c, "/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["object"], "text_completion");
  EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
}

// The streamed text and usage must be those of the same request answered in one piece.
void expect_stream_matches(httplib::Client& c, const std::string& path, json body, bool chat) {
  const auto whole = post_json(c, path, body);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  body["stream"] = true;
  const auto s = post_stream(c, path, body);
  EXPECT_EQ(s.status, 200);
  EXPECT_TRUE(s.done) << "no data: [DONE] at the end";
  ASSERT_GE(s.events.size(), 2u);
  if (chat) {
    EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  }
  const json& last = s.events.back();
  EXPECT_EQ(last["choices"][0]["finish_reason"], whole.body["choices"][0]["finish_reason"]);
  EXPECT_EQ(last["usage"], whole.body["usage"]);
  EXPECT_EQ(s.text, chat ? whole.body["choices"][0]["message"]["content"]
                         : whole.body["choices"][0]["text"]);
  EXPECT_LE(s.n_text_chunks, last["usage"]["completion_tokens"].get<int>());
  EXPECT_EQ(s.events.front()["object"], chat ? "chat.completion.chunk" : "text_completion");
}

TEST_F(ServeApi, ChatStreamMatchesTheWholeAnswer) {
  auto c = client();
  expect_stream_matches(c, "/v1/chat/completions", chat("tell me a story", 24), true);
}

TEST_F(ServeApi, CompletionStreamMatchesTheWholeAnswer) {
  auto c = client();
  expect_stream_matches(c, "/v1/completions",
                        {{"prompt", "the cat"}, {"max_tokens", 24}, {"temperature", 0}}, false);
}

TEST_F(ServeApi, StopStringEndsTheTextBeforeIt) {
  auto c = client();
  json body = {{"prompt", "abc"}, {"max_tokens", 24}, {"temperature", 0}};
  const auto whole = post_json(c, "/v1/completions", body);
  const std::string text = whole.body["choices"][0]["text"];
  // The random model writes bytes that are not UTF-8 (answered as U+FFFD): stop at an ASCII
  // letter or digit, which stands for itself in both the raw and the answered text.
  const size_t at = text.find_last_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  if (at == std::string::npos || at == 0) GTEST_SKIP() << "nothing to cut at in '" << text << "'";
  const std::string stop = text.substr(at, 1);
  body["stop"] = json::array({"never there", stop});
  const auto cut = post_json(c, "/v1/completions", body);
  EXPECT_EQ(cut.body["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cut.body["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServeApi, TokenizeDetokenizeRoundTrip) {
  auto c = client();
  const auto t = post_json(c, "/tokenize", json{{"content", "hello world"}});
  ASSERT_EQ(t.status, 200) << t.raw;
  ASSERT_FALSE(t.body["tokens"].empty());
  const auto d = post_json(c, "/detokenize", json{{"tokens", t.body["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["content"], "hello world");
  expect_error(post_json(c, "/detokenize", json{{"tokens", {100000}}}), 400, "vocabulary");
}

TEST_F(ServeApi, BadRequestsGetOpenAiErrors) {
  auto c = client();
  expect_error(post_json(c, "/v1/chat/completions", std::string("{\"messages\": [")), 400, "JSON");
  expect_error(post_json(c, "/v1/chat/completions", json{{"messages", "hi"}}), 400, "messages");
  expect_error(post_json(c, "/v1/chat/completions", json::object()), 400, "'messages' is required");
  expect_error(post_json(c, "/v1/completions", json{{"prompt", "x"}, {"max_tokens", "3"}}), 400,
               "max_tokens");
  expect_error(post_json(c, "/v1/chat/completions",
                         json{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}),
               400, "robot");
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "story time ";
  expect_error(post_json(c, "/v1/completions", json{{"prompt", long_prompt}}), 400, "context");
  expect_error(post_json(c, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 1000}}), 400,
               "context");
  // Unknown fields are ignored, as OpenAI does.
  EXPECT_EQ(post_json(c, "/v1/completions",
                      json{{"prompt", "hi"}, {"max_tokens", 2}, {"logit_bias", json::object()}})
                .status,
            200);
}

// The max_tokens check and generation agree on what fits: a reply ends at a full context with
// n_ctx - n_prompt + 1 tokens (the last is sampled, never evaluated), so that many are accepted
// and generated, and one more is refused.
TEST_F(ServeApi, MaxTokensCheckAgreesWithGeneration) {
  auto c = client();
  const auto probe = post_json(c, "/v1/completions", json{{"prompt", "fit"}, {"max_tokens", 1}});
  ASSERT_EQ(probe.status, 200) << probe.raw;
  const int n_prompt = probe.body["usage"]["prompt_tokens"];
  const int most = 128 - n_prompt + 1;
  const auto full = post_json(c, "/v1/completions",
                              json{{"prompt", "fit"}, {"max_tokens", most}, {"ignore_eos", true},
                                   {"temperature", 0}});
  ASSERT_EQ(full.status, 200) << full.raw;
  EXPECT_EQ(full.body["usage"]["completion_tokens"], most);
  EXPECT_EQ(full.body["choices"][0]["finish_reason"], "length");
  // Without max_tokens, generation stops at the same place.
  const auto open = post_json(c, "/v1/completions",
                              json{{"prompt", "fit"}, {"ignore_eos", true}, {"temperature", 0}});
  EXPECT_EQ(open.body["usage"]["completion_tokens"], most);
  expect_error(post_json(c, "/v1/completions", json{{"prompt", "fit"}, {"max_tokens", most + 1}}),
               400, "context");
}

// Special tokens typed in a chat message are text: "</s>" is four characters of the prompt, not
// the end-of-sequence token (the template's own markup is still parsed).
TEST_F(ServeApi, SpecialTokensInChatContentAreText) {
  auto c = client();
  const auto plain = post_json(c, "/v1/chat/completions", chat("", 1));
  const auto typed = post_json(c, "/v1/chat/completions", chat("</s></s></s></s>", 1));
  ASSERT_EQ(plain.status, 200) << plain.raw;
  ASSERT_EQ(typed.status, 200) << typed.raw;
  const int extra = typed.body["usage"]["prompt_tokens"].get<int>() -
                    plain.body["usage"]["prompt_tokens"].get<int>();
  // As special tokens they would add 4; as text each is 4 one-character pieces here.
  EXPECT_GE(extra, 12) << "'</s>' in chat content was parsed as a special token";
  const auto ids = post_json(c, "/tokenize", json{{"content", "</s>"}});
  for (const auto& id : ids.body["tokens"]) EXPECT_NE(id, 2);
}

TEST_F(ServeApi, BodyOverTheLimitIs413AndUnknownPathIs404) {
  auto c = client();
  const std::string huge = "{\"prompt\": \"" + std::string(2 << 20, 'a') + "\"}";
  expect_error(post_json(c, "/v1/completions", huge), 413, "too large");
  expect_error(get_json(c, "/v1/nothing"), 404);
  // The server is still fine afterwards.
  EXPECT_EQ(post_json(c, "/v1/chat/completions", chat("hi", 2)).status, 200);
}

TEST(ServeAuth, ApiKeyGuardsEverythingButHealth) {
  ServerProcess server({"-m", small_model(), "-c", "64", "-t", "1", "--api-key", "sesame"});
  auto c = server.client();
  EXPECT_EQ(get_json(c, "/health").status, 200);
  expect_error(get_json(c, "/v1/models"), 401, "API key");
  expect_error(post_json(c, "/v1/completions", json{{"prompt", "hi"}}), 401);
  expect_error(get_json(c, "/v1/models", {{"Authorization", "Bearer wrong"}}), 401);
  EXPECT_EQ(get_json(c, "/v1/models", {{"Authorization", "Bearer sesame"}}).status, 200);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeApi, PortInUseIsAClearError) {
  const auto r =
      run_hearth({"serve", "-m", small_model(), "--port", std::to_string(server_->port())});
  expect_clean_error(r, "cannot listen");
}

TEST(ServeCli, BadModelFailsCleanly) {
  EXPECT_THROW(ServerProcess({"-m", "/nonexistent.gguf"}, 5), std::runtime_error);
}

}  // namespace
}  // namespace hearth::test
