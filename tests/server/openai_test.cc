// The OpenAI request rules and response shapes (src/server/openai.h) and the generation helpers
// that need no model: every refusal names its field and carries status 400.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "server/generation.h"
#include "server/openai.h"

namespace hearth::server {
namespace {

using nlohmann::json;

// The ApiError status and message of parsing `body`; status 0 when it parsed.
std::pair<int, std::string> refusal(const std::string& body, Endpoint e = Endpoint::Chat) {
  try {
    parse_completion_request(body, e);
  } catch (const ApiError& err) {
    return {err.status, err.what()};
  }
  return {0, ""};
}

void expect_refused(const std::string& body, const std::string& needle, Endpoint e = Endpoint::Chat) {
  const auto [status, message] = refusal(body, e);
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(message.find(needle), std::string::npos) << body << " -> " << message;
}

TEST(OpenAiParse, ChatRequestWithEveryField) {
  const auto r = parse_completion_request(
      R"({"model":"x","messages":[{"role":"system","content":"be brief"},
          {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
          "max_tokens":12,"temperature":0.5,"top_p":0.9,"seed":7,"stop":["a","b"],"stream":true,
          "frequency_penalty":0,"user":"ignored","ignore_eos":true})",
      Endpoint::Chat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "hi there");
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.sampling.temp, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_TRUE(r.has_seed);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(OpenAiParse, CompletionDefaultsFollowOpenAi) {
  const auto r = parse_completion_request(R"({"prompt":"once","stop":"x"})", Endpoint::Completion);
  EXPECT_EQ(r.prompt, "once");
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampling.temp, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FALSE(r.has_seed);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(parse_completion_request(R"({"prompt":["one"],"max_completion_tokens":3})",
                                     Endpoint::Completion).max_tokens, 3);
}

TEST(OpenAiParse, RefusesMalformedBodies) {
  expect_refused("{", "not valid JSON");
  expect_refused("[1,2]", "JSON object");
  expect_refused("{}", "'messages' is required");
  expect_refused(R"({"messages":[]})", "must not be empty");
  expect_refused(R"({"messages":"hi"})", "'messages' must be");
  expect_refused(R"({"messages":[{"role":"tool","content":"x"}]})", "role 'tool'");
  expect_refused(R"({"messages":[{"content":"x"}]})", "role must be a string");
  expect_refused(R"({"messages":[{"role":"user","content":5}]})", "messages[0].content");
  expect_refused(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "text");
  expect_refused("{}", "'prompt' is required", Endpoint::Completion);
  expect_refused(R"({"prompt":3})", "'prompt' must be a string", Endpoint::Completion);
}

TEST(OpenAiParse, RefusesWrongTypesAndRanges) {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  expect_refused("{" + m + R"(,"max_tokens":"5"})", "'max_tokens' must be an integer");
  expect_refused("{" + m + R"(,"max_tokens":0})", "'max_tokens' is out of range");
  expect_refused("{" + m + R"(,"max_tokens":99999999999999999999})", "max_tokens");
  expect_refused("{" + m + R"(,"temperature":"hot"})", "'temperature' must be a number");
  expect_refused("{" + m + R"(,"temperature":3})", "'temperature' must be between");
  expect_refused("{" + m + R"(,"top_p":0})", "'top_p' must be between");
  expect_refused("{" + m + R"(,"stream":"yes"})", "'stream' must be a boolean");
  expect_refused("{" + m + R"(,"stop":[1]})", "'stop' must be");
  expect_refused("{" + m + R"(,"seed":1.5})", "'seed' must be an integer");
  expect_refused("{" + m + R"(,"n":2})", "'n' must be 1");
  EXPECT_EQ(refusal("{" + m + R"(,"max_tokens":null,"stop":null})").first, 0);
}

TEST(OpenAiParse, TokenizeAndDetokenizeBodies) {
  EXPECT_EQ(parse_tokenize_request(R"({"content":"abc"})"), "abc");
  EXPECT_EQ(parse_detokenize_request(R"({"tokens":[1,2,3]})"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THROW(parse_tokenize_request(R"({"content":1})"), ApiError);
  EXPECT_THROW(parse_detokenize_request(R"({"tokens":[-1]})"), ApiError);
  EXPECT_THROW(parse_detokenize_request(R"({"tokens":"1"})"), ApiError);
  EXPECT_EQ(json::parse(format_tokens({4, 5}))["tokens"], json::array({4, 5}));
  EXPECT_EQ(json::parse(format_content("hé"))["content"], "hé");
}

TEST(OpenAiFormat, ErrorBodyHasOpenAiShape) {
  const json e = json::parse(error_body(413, "too big"));
  EXPECT_EQ(e["error"]["message"], "too big");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], 413);
  EXPECT_EQ(json::parse(default_error_body(404))["error"]["code"], 404);
}

TEST(OpenAiFormat, ChatAndCompletionResponses) {
  const CompletionInfo chat{Endpoint::Chat, "chatcmpl-1", "m.gguf", 42};
  const json c = json::parse(format_response(chat, "hello", "stop", {5, 2}));
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"]["total_tokens"], 7);
  const CompletionInfo text{Endpoint::Completion, "cmpl-1", "m.gguf", 42};
  const json t = json::parse(format_response(text, "\xff", "length", {1, 1}));
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "\xEF\xBF\xBD");  // invalid UTF-8 replaced, not thrown
  EXPECT_EQ(t["model"], "m.gguf");
  // The fields OpenAI's schema requires of both (the Node client's types read them).
  EXPECT_EQ(c["id"], "chatcmpl-1");
  EXPECT_EQ(t["id"], "cmpl-1");
  for (const json& r : {c, t}) {
    EXPECT_EQ(r["created"], 42);
    EXPECT_EQ(r["choices"][0]["index"], 0);
    ASSERT_TRUE(r["choices"][0].contains("logprobs")) << r;
    EXPECT_TRUE(r["choices"][0]["logprobs"].is_null()) << r;
  }
}

TEST(OpenAiParse, LogprobsFields) {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(parse_completion_request("{" + m + "}", Endpoint::Chat).logprobs, -1);
  EXPECT_EQ(parse_completion_request("{" + m + R"(,"logprobs":true})", Endpoint::Chat).logprobs, 0);
  EXPECT_EQ(
      parse_completion_request("{" + m + R"(,"logprobs":true,"top_logprobs":3})", Endpoint::Chat)
          .logprobs,
      3);
  EXPECT_EQ(parse_completion_request("{" + m + R"(,"logprobs":false})", Endpoint::Chat).logprobs,
            -1);
  expect_refused("{" + m + R"(,"top_logprobs":3})", "'top_logprobs' needs 'logprobs': true");
  expect_refused("{" + m + R"(,"logprobs":1})", "'logprobs' must be a boolean");
  expect_refused("{" + m + R"(,"logprobs":true,"top_logprobs":21})", "'top_logprobs'");
  const std::string p = R"("prompt":"x")";
  EXPECT_EQ(parse_completion_request("{" + p + R"(,"logprobs":2})", Endpoint::Completion).logprobs,
            2);
  expect_refused("{" + p + R"(,"logprobs":true})", "'logprobs' must be an integer",
                 Endpoint::Completion);
  expect_refused("{" + p + R"(,"logprobs":-1})", "'logprobs'", Endpoint::Completion);
}

json event(const std::string& sse);

TEST(OpenAiFormat, LogprobsInBothForms) {
  const std::vector<LogprobEntry> entries = {{"He", -0.5, {{"He", -0.5}, {"She", -1.25}}},
                                             {"llo", -0.125, {{"llo", -0.125}, {"y", -3.0}}}};
  const CompletionInfo chat{Endpoint::Chat, "chatcmpl-1", "m.gguf", 42};
  const json c = json::parse(format_response(chat, "Hello", "stop", {5, 2}, &entries));
  const json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "He");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], json::array({72, 101}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "She");
  EXPECT_EQ(content[0]["top_logprobs"][1]["logprob"], -1.25);
  const CompletionInfo text{Endpoint::Completion, "cmpl-1", "m.gguf", 42};
  const json t = json::parse(format_response(text, "Hello", "stop", {5, 2}, &entries));
  const json& lp = t["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"He", "llo"}));
  EXPECT_EQ(lp["token_logprobs"], json::array({-0.5, -0.125}));
  EXPECT_EQ(lp["top_logprobs"][1]["y"], -3.0);
  EXPECT_EQ(lp["text_offset"], json::array({0, 2}));
  // A stream's chunk carries its own tokens, their offsets counted from the reply's start.
  const std::vector<LogprobEntry> later = {entries[1]};
  const json ct = event(format_text_chunk(text, "llo", {&later, 2}));
  EXPECT_EQ(ct["choices"][0]["logprobs"]["tokens"], json::array({"llo"}));
  EXPECT_EQ(ct["choices"][0]["logprobs"]["text_offset"], json::array({2}));
  const json cc = event(format_final_chunk(chat, "stop", {5, 2}, {&later, 2}));
  EXPECT_EQ(cc["choices"][0]["logprobs"]["content"][0]["token"], "llo");
  EXPECT_FALSE(event(format_text_chunk(chat, "x"))["choices"][0].contains("logprobs"));
}

TEST(Generation, TokenLogprobsAreTheLogSoftmax) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  std::vector<int32_t> order;
  const TokenLogprobs t = token_logprobs(logits, 2, 3, order);
  double z = 0;
  for (const float l : logits) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(t.logprob, 2.0 - std::log(z), 1e-12);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 1);  // ties: the lower id first
  EXPECT_EQ(t.top[1].first, 3);
  EXPECT_EQ(t.top[2].first, 2);
  EXPECT_NEAR(t.top[0].second, 3.0 - std::log(z), 1e-12);
  EXPECT_TRUE(token_logprobs(logits, 0, 0, order).top.empty());
}

json event(const std::string& sse) {
  EXPECT_EQ(sse.rfind("data: ", 0), 0u);
  EXPECT_TRUE(sse.ends_with("\n\n"));
  return json::parse(sse.substr(6));
}

TEST(OpenAiFormat, StreamChunks) {
  const CompletionInfo chat{Endpoint::Chat, "chatcmpl-1", "m", 1};
  EXPECT_EQ(event(format_role_chunk(chat))["choices"][0]["delta"]["role"], "assistant");
  const json c = event(format_text_chunk(chat, "hi"));
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "hi");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  const json f = event(format_final_chunk(chat, "length", {3, 4}));
  EXPECT_EQ(f["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(f["choices"][0]["delta"].empty());
  EXPECT_EQ(f["usage"]["completion_tokens"], 4);
  const CompletionInfo text{Endpoint::Completion, "cmpl-1", "m", 1};
  EXPECT_EQ(event(format_text_chunk(text, "yo"))["choices"][0]["text"], "yo");
  EXPECT_EQ(json::parse(format_models("m", 5))["data"][0]["id"], "m");
}

TEST(Generation, Utf8CompletePrefixHoldsBackAnUnfinishedCharacter) {
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);              // é cut after its first byte
  EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(utf8_complete_prefix("\xE2\x82"), 0u);           // € cut after two bytes
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(utf8_complete_prefix("\x80\x80\x80\x80\x80"), 5u);  // not UTF-8: nothing to wait for
}

TEST(Generation, JobHandsTextAcrossThreadsAndStopsWhenCancelled) {
  auto job = std::make_shared<GenerationJob>(GenerationRequest{});
  std::thread worker([&] {
    EXPECT_TRUE(job->push("a"));
    EXPECT_TRUE(job->push(""));
    EXPECT_TRUE(job->push("b"));
    GenerationResult r;
    r.n_generated = 2;
    job->finish(r);
  });
  std::string text, piece;
  for (;;) {
    const auto e = job->next(piece, std::chrono::seconds(5));
    ASSERT_NE(e, GenerationJob::Event::Timeout);
    if (e != GenerationJob::Event::Text) break;
    text += piece;
  }
  worker.join();
  EXPECT_EQ(text, "ab");
  EXPECT_EQ(job->result().n_generated, 2);
  job->cancel();
  EXPECT_FALSE(job->push("c"));
  GenerationJob failed{GenerationRequest{}};
  failed.fail("boom");
  EXPECT_EQ(failed.next(piece, std::chrono::milliseconds(1)), GenerationJob::Event::Failed);
  EXPECT_EQ(failed.error(), "boom");
}

}  // namespace
}  // namespace hearth::server
