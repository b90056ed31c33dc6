// The official OpenAI client (Node, `openai` 4.x from npm) against hearth serve with an API key:
// streaming and whole chat completions, text completions, and errors as the client's typed
// errors. Skips when node or npm is missing or the package cannot be installed (no network).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/test_util.h"
#include "server/server_process.h"

namespace hearth::test {
namespace {

using nlohmann::json;

// The last lines of s, to quote a long log.
std::string tail(const std::string& s, size_t n_chars = 1500) {
  return s.size() <= n_chars ? s : "..." + s.substr(s.size() - n_chars);
}

TEST(OpenAiClient, NodeClientStreamsCompletesAndSeesErrors) {
  for (const char* tool : {"node", "npm"}) {
    if (run_command({tool, "--version"}).exit_code != 0) {
      GTEST_SKIP() << tool << " is not installed";
    }
  }
  const std::string dir = temp_dir();
  // Major version 4 runs on Node 18 and 20; the lock on it keeps the test's expectations valid.
  const CommandResult install =
      run_command({"timeout", "300", "npm", "install", "--prefix", dir, "openai@4", "--no-audit",
                   "--no-fund", "--loglevel=error"});
  if (install.exit_code != 0) {
    GTEST_SKIP() << "npm install openai@4 failed (no network?), exit " << install.exit_code << ":\n"
                 << tail(install.err);
  }
  std::filesystem::copy_file(std::string(HEARTH_SOURCE_DIR) + "/tests/server/openai_client.mjs",
                             dir + "/openai_client.mjs");

  ServerProcess server({"-m", small_model(), "-c", "128", "-t", "1", "--api-key", "sesame"});
  const CommandResult r = run_command({"timeout", "120", "node", dir + "/openai_client.mjs",
                                       std::to_string(server.port()), "sesame"});
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << tail(r.err);
  const json out = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << r.out;
  SCOPED_TRACE(out.dump(1));

  EXPECT_EQ(out["models"], json::array({"small.gguf"}));

  const json& streamed = out["streamed"];
  const json& whole = out["whole"];
  EXPECT_FALSE(whole["text"].get<std::string>().empty());
  EXPECT_EQ(streamed["text"], whole["text"]) << "greedy: the stream must say what the whole says";
  EXPECT_EQ(streamed["usage"], whole["usage"]);
  EXPECT_EQ(streamed["finish_reason"], whole["finish_reason"]);
  const int max_tokens = out["max_tokens"];
  if (whole["finish_reason"] == "length") {
    EXPECT_EQ(whole["usage"]["completion_tokens"], max_tokens);
  } else {
    EXPECT_EQ(whole["finish_reason"], "stop");
  }
  EXPECT_GE(streamed["chunks"].get<int>(), 3);  // role, text, finish
  ASSERT_EQ(streamed["ids"].size(), 1u) << "every chunk of one stream carries the same id";
  EXPECT_TRUE(streamed["ids"][0].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(streamed["objects"], json::array({"chat.completion.chunk"}));
  EXPECT_TRUE(whole["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_GT(whole["created"].get<int64_t>(), 1'600'000'000);
  EXPECT_EQ(whole["model"], "small.gguf");
  EXPECT_EQ(whole["role"], "assistant");
  EXPECT_EQ(whole["index"], 0);

  EXPECT_EQ(out["completion"]["object"], "text_completion");
  EXPECT_EQ(out["completion"]["text"], out["completion"]["streamed"]);

  const json& errors = out["errors"];
  EXPECT_EQ(errors["auth"]["name"], "AuthenticationError");
  EXPECT_EQ(errors["auth"]["status"], 401);
  EXPECT_NE(errors["auth"]["message"].get<std::string>().find("API key"), std::string::npos);
  EXPECT_EQ(errors["bad_request"]["name"], "BadRequestError");
  EXPECT_EQ(errors["bad_request"]["status"], 400);
  EXPECT_NE(errors["bad_request"]["message"].get<std::string>().find("messages"),
            std::string::npos);
  EXPECT_EQ(errors["bad_stream"]["status"], 400);
  EXPECT_NE(errors["bad_stream"]["message"].get<std::string>().find("context"), std::string::npos);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace hearth::test
