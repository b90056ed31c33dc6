// POST /apply-template on models that carry the real chat templates of ../shared/chat-templates:
// each case's rendering comes back byte-identical, with the model's own BOS/EOS texts, and a
// template that refuses a conversation answers 400 with its message. /v1/chat/completions renders
// with the same template by default.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "server/client_util.h"
#include "server/server_process.h"

namespace hearth::test {
namespace {

using nlohmann::json;

// The small synthetic model rewritten with `jinja` as tokenizer.chat_template and its BOS and EOS
// tokens renamed to the texts the template's cases pass.
std::string model_with_template(const std::string& name, const std::string& jinja,
                                const std::string& bos, const std::string& eos) {
  const auto file = gguf::GgufFile::open(small_model());
  const auto texts = file->get_string_array("tokenizer.ggml.tokens");
  std::vector<std::string> tokens(texts->begin(), texts->end());
  tokens.at(*file->get_int("tokenizer.ggml.bos_token_id")) = bos;
  tokens.at(*file->get_int("tokenizer.ggml.eos_token_id")) = eos;
  gguf::GgufWriter w;
  for (const auto& [key, value] : file->metadata()) w.copy_value(key, value);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_string("tokenizer.chat_template", jinja);
  for (const gguf::TensorInfo& t : file->tensors()) {
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims), t.data, t.nbytes);
  }
  static const std::string dir = temp_dir();
  const std::string path = dir + "/" + name + ".gguf";
  w.write(path);
  return path;
}

struct TemplateCases {
  std::string bos, eos;
  std::vector<json> cases;
};

TEST(ServeApplyTemplate, SharedCasesThroughTheServer) {
  HEARTH_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/chat-templates/";
  const json cases = json::parse(read_file(dir + "cases.json"));
  std::map<std::string, TemplateCases> by_template;
  for (const json& c : cases["cases"]) {
    TemplateCases& t = by_template[c["template"].get<std::string>()];
    t.bos = c["bos_token"];
    t.eos = c["eos_token"];
    t.cases.push_back(c);
  }
  size_t identical = 0, refused = 0, n = 0;
  for (const auto& [file, t] : by_template) {
    SCOPED_TRACE(file);
    const std::string model =
        model_with_template("tmpl" + std::to_string(n), read_file(dir + file), t.bos, t.eos);
    ServerProcess server({"-m", model, "-c", "256", "-t", "1"});
    auto client = server.client();
    for (const json& c : t.cases) {
      ++n;
      const json& conversation = cases["conversations"][c["conversation"].get<std::string>()];
      // /apply-template always adds the generation prompt; other cases are for the unit tests.
      if (!c["add_generation_prompt"].get<bool>()) continue;
      const auto r = post_json(client, "/apply-template", {{"messages", conversation["messages"]}});
      if (c.contains("error")) {
        EXPECT_EQ(r.status, 400) << r.raw;
        EXPECT_EQ(r.body["error"]["message"], c["error"]) << r.raw;
        refused += r.status == 400;
        continue;
      }
      ASSERT_EQ(r.status, 200) << r.raw;
      const std::string expected = read_file(dir + c["expected"].get<std::string>());
      EXPECT_EQ(r.body["prompt"], expected) << c["conversation"];
      identical += r.body["prompt"] == expected;
    }
    // Tools and tool calls reach the template as sent (Qwen's uses no BOS/EOS text, so the
    // rendering made for tests/data/chat-tools holds here too).
    if (file.starts_with("Qwen-Qwen2.5")) {
      const std::string data = std::string(HEARTH_SOURCE_DIR) + "/tests/data/chat-tools/";
      // ordered_json: the keys go out in the file's order, which tojson shows.
      const auto conv = nlohmann::ordered_json::parse(read_file(data + "conversation.json"));
      const nlohmann::ordered_json body = {{"messages", conv["messages"]},
                                           {"tools", conv["tools"]}};
      const auto r = post_json(client, "/apply-template", body.dump());
      EXPECT_EQ(r.body["prompt"], read_file(data + "Qwen-Qwen2.5-7B-Instruct.txt")) << r.raw;
    }
    // The chat endpoint renders with the same template: Gemma's refusal comes back from it too.
    if (file.find("gemma") != std::string::npos) {
      const auto r = post_json(
          client, "/v1/chat/completions",
          {{"messages",
            {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}},
           {"max_tokens", 1}});
      EXPECT_EQ(r.status, 400) << r.raw;
      EXPECT_EQ(r.body["error"]["message"], "System role not supported") << r.raw;
    } else {
      // The long system preambles (Command R's, Hermes') outgrow the tiny model's context, which
      // the server must then say rather than truncate.
      const auto r = post_json(client, "/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", "hello"}}}},
                                {"max_tokens", 1},
                                {"temperature", 0}});
      if (r.status != 200) {
        EXPECT_EQ(r.status, 400) << r.raw;
        EXPECT_NE(r.raw.find("the prompt has"), std::string::npos) << r.raw;
      }
    }
    EXPECT_EQ(server.stop(), 0) << server.log();
    EXPECT_NE(server.log().find("the model's Jinja template"), std::string::npos) << server.log();
  }
  std::printf("/apply-template: %zu renderings identical, %zu refusals, of %zu cases\n", identical,
              refused, n);
  EXPECT_EQ(identical + refused, 24u);  // the cases with add_generation_prompt
}

TEST(ServeApplyTemplate, BadBodiesAreRefused) {
  ServerProcess server({"-m", small_model(), "-c", "128", "-t", "1"});
  auto client = server.client();
  EXPECT_EQ(post_json(client, "/apply-template", json{{"x", 1}}).status, 400);
  EXPECT_EQ(post_json(client, "/apply-template", json{{"messages", {1, 2}}}).status, 400);
  const auto ok =
      post_json(client, "/apply-template", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_TRUE(ok.body["prompt"].is_string());
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace hearth::test
