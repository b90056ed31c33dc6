// `hearth chat` fed through stdin as a user would type: turns, /exit and end of input, reply
// limits, the chat template chosen (model, fallback, override), the KV cache kept across turns,
// a full context, and bad flags.
#include <gtest/gtest.h>

#include <regex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf.h"

namespace hearth {
namespace {

using test::expect_clean_error;
using test::run_hearth;
using test::run_hearth_with_input;

// What -v says about one turn.
struct Turn {
  int n_new = 0, n_cached = 0, n_reply = 0;
  bool again = false;  // the conversation was evaluated from the start
  std::string stop;
};

std::vector<Turn> turns(const std::string& err) {
  static const std::regex re(
      R"(prompt (\d+) new tokens \((\d+) cached(, conversation evaluated again)?\).*reply (\d+) tokens.*stop: ([a-z -]+))");
  std::vector<Turn> out;
  for (const std::string& line : test::split(err, "\n")) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    out.push_back({std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[4]), m[3].matched, m[5]});
  }
  return out;
}

// The model file with tokenizer.chat_template set to `jinja`.
std::string with_template(const std::string& src, const std::string& dst, const std::string& jinja) {
  const auto file = gguf::GgufFile::open(src);
  gguf::GgufWriter w;
  for (const auto& [key, value] : file->metadata()) w.copy_value(key, value);
  w.set_string("tokenizer.chat_template", jinja);
  for (const gguf::TensorInfo& t : file->tensors()) {
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims), t.data, t.nbytes);
  }
  w.write(dst);
  return dst;
}

// The synthetic model the tests chat with (no chat template), made once per test process.
const std::string& dir() {
  static const std::string d = test::temp_dir();
  return d;
}
const std::string& model() {
  static const std::string path = [] {
    const std::string p = dir() + "/chat.gguf";
    const auto r = run_hearth({"synth", "-o", p, "--n-embd", "64", "--n-layer", "2", "--n-ff", "96",
                               "--n-head", "4", "--n-head-kv", "2", "--n-vocab", "300", "--n-ctx",
                               "256", "--type", "f32"});
    if (r.exit_code != 0) throw std::runtime_error("hearth synth failed: " + r.err);
    return p;
  }();
  return path;
}

// hearth chat with `input` on stdin: greedy, one thread, with per-turn statistics.
test::CommandResult chat(const std::string& input, const std::vector<std::string>& extra = {},
                         const std::string& model_path = model()) {
  std::vector<std::string> args = {"chat", "-m", model_path, "--temp", "0", "-t", "1", "-v"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_hearth_with_input(args, input);
}

TEST(ChatCli, TwoTurnsThenExitGiveTwoRepliesAndKeepTheCache) {
  const auto r = chat("hello\nhow are you\n/exit\nnever sent\n", {"-n", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto t = turns(r.err);
  ASSERT_EQ(t.size(), 2u) << r.err;
  EXPECT_GE(test::count_lines(r.out), 2) << r.out;
  EXPECT_NE(r.err.find("chat template chatml (the model has none; default)"), std::string::npos)
      << r.err;
  // The second turn evaluates only what the cache lacks: the first prompt and reply stay.
  // A reply that ended on an end-of-turn token was evaluated whole; one cut by the limit or a stop
  // string leaves its last token to the next turn.
  const int tail = t[0].stop == "end of turn" ? 0 : 1;
  EXPECT_EQ(t[1].n_cached, t[0].n_new + t[0].n_reply - tail) << r.err;
  EXPECT_FALSE(t[1].again);
  EXPECT_EQ(t[0].n_cached, 0);
}

// "</s>" typed in a message is four characters of text, not the end-of-sequence token: as text,
// each of the four is its own piece in this vocabulary.
TEST(ChatCli, SpecialTokensTypedInAMessageAreText) {
  const auto plain = turns(chat("x\n", {"-n", "1"}).err);
  const auto typed = turns(chat("x</s></s></s></s>\n", {"-n", "1"}).err);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(typed.size(), 1u);
  EXPECT_GE(typed[0].n_new - plain[0].n_new, 12);
}

TEST(ChatCli, EndOfInputLeavesCleanly) {
  const auto r = chat("hello", {"-n", "4"});  // no line end, no /exit
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(turns(r.err).size(), 1u) << r.err;
  EXPECT_EQ(chat("", {"-n", "4"}).exit_code, 0);
}

TEST(ChatCli, NLimitsEveryReply) {
  const auto r = chat("one\ntwo\nthree\n", {"-n", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto t = turns(r.err);
  ASSERT_EQ(t.size(), 3u) << r.err;
  for (const Turn& turn : t) {
    EXPECT_LE(turn.n_reply, 5);
    if (turn.n_reply < 5) {
      EXPECT_NE(turn.stop, "token limit");
    }
  }
  // Greedy: a shorter limit gives the start of the longer reply.
  const auto short_reply = chat("one\n", {"-n", "5"});
  const auto long_reply = chat("one\n", {"-n", "12"});
  ASSERT_EQ(short_reply.exit_code, 0) << short_reply.err;
  const std::string start = short_reply.out.substr(0, short_reply.out.size() - 1);  // its "\n"
  EXPECT_EQ(long_reply.out.rfind(start, 0), 0u) << short_reply.out << " / " << long_reply.out;
}

TEST(ChatCli, FirstReplyIsWhatRunGivesForTheRenderedPrompt) {
  const std::string prompt = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n";
  const auto c = chat("hello\n", {"-n", "8"});
  const auto r = run_hearth({"run", "-m", model(), "-p", prompt, "-n", "8", "--temp", "0", "-t", "1"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::trim(c.out), test::trim(r.out.substr(prompt.size())));
}

TEST(ChatCli, ResetStartsOverWithAnEmptyCache) {
  const auto r = chat("hello\n/reset\nhello\n", {"-n", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto t = turns(r.err);
  ASSERT_EQ(t.size(), 2u) << r.err;
  EXPECT_EQ(t[1].n_cached, 0);
  EXPECT_EQ(t[1].n_new, t[0].n_new);
  EXPECT_EQ(r.out.substr(0, r.out.size() / 2), r.out.substr(r.out.size() / 2)) << r.out;
}

TEST(ChatCli, TemplateComesFromTheFlagTheModelOrTheFallback) {
  auto r = chat("hello\nagain\n", {"-n", "4", "--chat-template", "llama3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("chat template llama3 (--chat-template)"), std::string::npos) << r.err;
  EXPECT_EQ(turns(r.err).size(), 2u) << r.err;

  const std::string zephyr = with_template(
      model(), dir() + "/zephyr.gguf",
      "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
      "message['content'] + eos_token }}{% endif %}{% endfor %}");
  r = chat("hello\n", {"-n", "4"}, zephyr);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("chat template: the model's Jinja template"), std::string::npos) << r.err;

  // A template that fails on a plain conversation (here: `message` outside any loop) falls back,
  // with a warning that says why.
  const std::string broken = with_template(model(), dir() + "/broken.gguf",
                                           "{{ '<start_of_turn>' + message['role'] }}");
  r = chat("hello\n", {"-n", "4"}, broken);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: the model's chat template cannot be rendered"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("using chatml (default)"), std::string::npos) << r.err;
}

TEST(ChatCli, SystemPromptIsPartOfTheFirstTurn) {
  const auto plain = turns(chat("hello\n", {"-n", "2"}).err);
  const auto with_system = turns(chat("hello\n", {"-n", "2", "--system", "You are terse."}).err);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(with_system.size(), 1u);
  EXPECT_GT(with_system[0].n_new, plain[0].n_new + 10);
}

TEST(ChatCli, FullContextDropsTheOldestTurns) {
  std::string input;
  for (int i = 0; i < 6; ++i) input += "tell me more about the weather\n";
  const auto r = chat(input, {"-n", "8", "-c", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto t = turns(r.err);
  ASSERT_EQ(t.size(), 6u) << r.err;
  EXPECT_NE(r.err.find("dropped the"), std::string::npos) << r.err;
  bool again = false, reused = false;
  for (const Turn& turn : t) {
    EXPECT_LE(turn.n_cached + turn.n_new + turn.n_reply - 1, 200) << r.err;
    reused = reused || turn.n_cached > 0;
    again = again || turn.again;
  }
  EXPECT_TRUE(again) << r.err;   // after dropping a turn
  EXPECT_TRUE(reused) << r.err;  // between drops
}

TEST(ChatCli, MessageTooLongIsRefusedAndTheChatGoesOn) {
  const std::string too_long(400, 'x');
  const auto r = chat(too_long + "\nhi\n", {"-n", "4", "-c", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("error: the message needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("raise -c"), std::string::npos) << r.err;
  const auto t = turns(r.err);
  ASSERT_EQ(t.size(), 1u) << r.err;
  EXPECT_EQ(t[0].n_cached, 0);  // the refused message left nothing behind
}

TEST(ChatCli, BadInputGivesOneCleanErrorLine) {
  expect_clean_error(run_hearth({"chat"}), "model");
  expect_clean_error(run_hearth({"chat", "-m", dir() + "/missing.gguf"}), "missing.gguf");
  expect_clean_error(run_hearth({"chat", "-m", model(), "--chat-template", "vicuna"}), "vicuna");
  expect_clean_error(run_hearth({"chat", "-m", model(), "-n", "-5"}), "n-predict");
  expect_clean_error(run_hearth({"chat", "-m", model(), "--top-p", "2"}), "top_p");
  expect_clean_error(run_hearth({"chat", "-m", model(), "--bogus"}), "bogus");
}

}  // namespace
}  // namespace hearth
