// The chat page at GET /: served without the API key as one self-contained HTML file, and, when
// Debian's Chromium is installed, loaded by scripts/chat-screenshot.sh in a real (headless)
// browser, where the streamed reply must reach the page.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "common/test_util.h"
#include "server/client_util.h"
#include "server/server_process.h"

namespace hearth::test {
namespace {

using nlohmann::json;

TEST(ChatPage, ServedWithoutTheApiKeyAndSelfContained) {
  ServerProcess server({"-m", small_model(), "-c", "64", "-t", "1", "--api-key", "sesame"});
  auto c = server.client();
  const auto page = c.Get("/?q=hello");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(page->body.starts_with("<!DOCTYPE html>")) << page->body.substr(0, 100);
  EXPECT_NE(page->body.find("v1/chat/completions"), std::string::npos);
  EXPECT_NE(page->body.find("Authorization"), std::string::npos) << "the page must send the key";
  // Nothing from elsewhere: no absolute URL, and a policy that forbids loading any.
  EXPECT_EQ(page->body.find("http://"), std::string::npos);
  EXPECT_EQ(page->body.find("https://"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'none'"),
            std::string::npos);
  // Only the page is public.
  EXPECT_EQ(get_json(c, "/v1/models").status, 401);
  EXPECT_EQ(server.stop(), 0);
}

// Text as it was before the DOM serializer escaped it.
std::string unescape_html(std::string s) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"},
                                 {"&gt;", ">"},
                                 {"&nbsp;", "\xC2\xA0"},
                                 {"&amp;", "&"}}) {
    for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) {
      s.replace(at, from.size(), to);
    }
  }
  return s;
}

TEST(ChatPage, ChromiumShowsTheStreamedReply) {
  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "/usr/bin/chromium is absent";
  const std::vector<std::string> serve_flags = {"-c", "128", "-t", "1"};
  // Greedy and short, so that the reply the page shows is known: the server's own answer.
  constexpr int kMaxTokens = 24;
  std::string expected;
  int expected_tokens = 0;
  {
    std::vector<std::string> args = {"-m", small_model()};
    args.insert(args.end(), serve_flags.begin(), serve_flags.end());
    ServerProcess server(args);
    auto c = server.client();
    const auto r =
        post_json(c, "/v1/chat/completions",
                  json{{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                       {"max_tokens", kMaxTokens},
                       {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.raw;
    expected = r.body["choices"][0]["message"]["content"];
    expected_tokens = r.body["usage"]["completion_tokens"];
    ASSERT_FALSE(expected.empty()) << "the model ends at once: no reply to look for";
  }

  const std::string dir = temp_dir();
  const std::string png = dir + "/chat.png", dom = dir + "/chat.html";
  std::vector<std::string> argv = {
      "env",
      std::string("HEARTH=") + HEARTH_BINARY,
      "CHAT_QUERY=q=Once%20upon%20a%20time&temperature=0&max_tokens=" + std::to_string(kMaxTokens),
      std::string(HEARTH_SOURCE_DIR) + "/scripts/chat-screenshot.sh",
      "--dom",
      dom,
      small_model(),
      png};
  argv.insert(argv.end(), serve_flags.begin(), serve_flags.end());
  const CommandResult r = run_command(argv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  const std::string image = read_file(png);
  EXPECT_GT(image.size(), 1000u);
  EXPECT_TRUE(image.starts_with("\x89PNG\r\n\x1a\n")) << "not a PNG";

  const std::string html = read_file(dom);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex(R"re(<div class="msg user">([^<]*)</div>)re")))
      << html;
  EXPECT_EQ(m[1], "Once upon a time");
  const std::regex assistant(
      R"re(<div class="msg assistant" data-state="([a-z]+)">([^<]*)</div>)re");
  ASSERT_TRUE(std::regex_search(html, m, assistant)) << html;
  EXPECT_EQ(m[1], "done") << "the stream did not end with [DONE]";
  EXPECT_EQ(unescape_html(m[2]), expected);
  EXPECT_NE(html.find(">" + std::to_string(expected_tokens) + " tokens, "), std::string::npos)
      << "no usage note under the reply\n"
      << html;
}

}  // namespace
}  // namespace hearth::test
