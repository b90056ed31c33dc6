// hearth chat: an interactive chat in the terminal. User lines come from stdin; replies stream to
// stdout token by token, one reply per turn followed by a newline. Load information, notices and
// (with -v) per-turn statistics go to stderr, so a piped session's stdout holds only the replies.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>

#include "chat_conversation.h"
#include "cli_common.h"
#include "device_flags.h"
#include "elapsed.h"
#include "commands.h"
#include "core/error.h"
#include "text/chat_template.h"

namespace hearth::cli {
namespace {

// The one piece of global mutable state in Hearth, because a signal handler can reach the program
// only through a lock-free flag: set by Ctrl-C (SIGINT), read between generated tokens and when
// reading a line is interrupted, cleared after each reply.
volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) {
  // A second Ctrl-C before the first was noticed (a long prompt is being evaluated): leave now.
  if (g_interrupted) _exit(130);
  g_interrupted = 1;
}

// Without SA_RESTART, so that Ctrl-C at the prompt interrupts the blocking read of stdin.
void install_sigint_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

enum class Input { Line, End, Interrupted };

// One line of stdin without its line end ("\n" or "\r\n").
Input read_line(std::string& line) {
  line.clear();
  for (;;) {
    const int c = std::fgetc(stdin);
    if (c == EOF) {
      if (g_interrupted) return Input::Interrupted;
      if (std::ferror(stdin) && errno == EINTR) {  // another signal: keep reading
        std::clearerr(stdin);
        continue;
      }
      if (line.empty()) return Input::End;
      break;  // a last line without a line end
    }
    if (c == '\n') break;
    line.push_back(static_cast<char>(c));
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return Input::Line;
}

bool is_blank(std::string_view s) { return s.find_first_not_of(" \t") == std::string_view::npos; }

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// The template: --chat-template, else the model's own Jinja template, else a family by its
// markers; says on stderr which one and why, since a wrong template silently ruins replies.
text::ChatRenderer choose_template(const std::string& flag, const Model& model) {
  std::string note;
  text::ChatRenderer renderer =
      text::ChatRenderer::choose(flag, model.chat_template(), model.token_text(model.bos()),
                                 model.token_text(model.eos()), &note);
  std::fprintf(stderr, "hearth chat: %s\n", note.c_str());
  return renderer;
}

void print_notices(const TurnStats& st, const Session& session, bool verbose) {
  if (st.n_dropped_turns > 0) {
    std::fprintf(stderr, "hearth chat: the context (%d tokens) was full: dropped the %d oldest turn%s\n",
                 session.n_ctx(), st.n_dropped_turns, st.n_dropped_turns == 1 ? "" : "s");
  }
  if (st.stop == StopReason::ContextFull) {
    std::fprintf(stderr, "hearth chat: the context is full (%d tokens); the oldest turns will be dropped for the next message\n",
                 session.n_ctx());
  }
  if (!verbose) return;
  std::fprintf(stderr, "hearth chat: prompt %d new tokens (%d cached%s) in %.3f s; reply %d tokens in %.3f s (%.2f tokens/s), stop: %s\n",
               st.n_evaluated, st.n_reused, st.re_evaluated ? ", conversation evaluated again" : "",
               st.prompt_s, st.n_generated, st.gen_s,
               st.n_generated > 0 && st.gen_s > 0 ? st.n_generated / st.gen_s : 0.0,
               to_string(st.stop));
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  CLI::App app("Chat with a model in the terminal (one message per line; /exit or Ctrl-D leaves)",
               "chat");
  std::string model_path, family_flag, system;
  int32_t n_predict = -1;
  bool verbose = false;
  SamplingFlags smp;
  SessionFlags sf;
  DeviceFlags df;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("--chat-template", family_flag,
                 "template family: " + text::chat_family_names() +
                     " (default: detected from the model, else chatml)")
      ->type_name("FAMILY")
      ->check(
          [](const std::string& v) {
            return text::parse_chat_family(v)
                       ? std::string()
                       : "unknown chat template '" + v + "' (known: " + text::chat_family_names() + ")";
          },
          "");
  app.add_option("--system", system, "system prompt");
  app.add_option("-n,--n-predict", n_predict,
                 "most tokens per reply (-1 = until the end of the turn or a full context)")
      ->check(CLI::Range(-1, 1 << 30))->capture_default_str();
  app.add_flag("-v,--verbose", verbose,
               "per-turn statistics on stderr: tokens evaluated and cached, speed, why the reply stopped");
  smp.add_to(app);
  sf.add_to(app);
  df.add_to(app);
  return run_app(app, argc, argv, [&] {
    const SamplerParams sp = smp.resolve();
    const auto t_load = Clock::now();
    const auto model = load_model(model_path, sf, df);
    Session session(model, sf.options());
    print_load_info(model_path, *model, session, seconds_since(t_load));
    ChatConversation chat(session, choose_template(family_flag, *model), sp, system);

    install_sigint_handler();
    const bool tty = isatty(STDIN_FILENO);
    if (tty) {
      std::fputs("hearth chat: type a message and press Enter; /reset starts over, /exit or Ctrl-D leaves, Ctrl-C stops a reply\n",
                 stderr);
    }
    std::string line;
    for (;;) {
      if (tty) write_out("> ");
      const Input in = read_line(line);
      if (in != Input::Line) {
        if (tty) write_out("\n");
        break;
      }
      if (is_blank(line)) continue;
      if (line == "/exit" || line == "/quit") break;
      if (line == "/reset") {
        chat.reset();
        std::fputs("hearth chat: the conversation starts over\n", stderr);
        continue;
      }
      bool started = false;  // leading whitespace of a reply (SentencePiece's space) is not shown
      auto on_text = [&](std::string_view s) {
        if (!started) {
          const size_t b = s.find_first_not_of(" \t\r\n");
          if (b == std::string_view::npos) return;
          s.remove_prefix(b);
          started = true;
        }
        write_out(s);
      };
      try {
        const TurnStats st =
            chat.reply(line, n_predict, on_text, [] { return g_interrupted != 0; });
        write_out("\n");
        print_notices(st, session, verbose);
      } catch (const Error& e) {
        // A message too long for the context: say so and keep the conversation going.
        if (started) write_out("\n");
        std::fprintf(stderr, "hearth chat: error: %s\n", e.what());
      }
      g_interrupted = 0;
    }
    return 0;
  });
}

}  // namespace hearth::cli
