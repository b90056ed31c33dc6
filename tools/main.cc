// hearth: one binary, one subcommand per job, with llama.cpp-style flags.
#include <cstdio>
#include <string_view>

#include "commands.h"

namespace {

struct Command {
  std::string_view name;
  int (*main)(int argc, char** argv);
  std::string_view help;
};

constexpr Command kCommands[] = {
    {"run", hearth::cli::cmd_run, "generate text from a prompt"},
    {"tokenize", hearth::cli::cmd_tokenize, "print the token ids of a text"},
    {"inspect", hearth::cli::cmd_inspect, "show a GGUF model's metadata and tensors"},
    {"synth", hearth::cli::cmd_synth, "write a random Llama-shaped GGUF model"},
    {"bench", hearth::cli::cmd_bench, "measure prompt and generation speed and the roofline"},
    {"perplexity", hearth::cli::cmd_perplexity, "perplexity of a text, optionally against dense"},
    {"calibrate", hearth::cli::cmd_calibrate, "profile activations; make predictors or thresholds"},
    {"imatrix", hearth::cli::cmd_imatrix, "importance matrix (activation statistics) for quantize"},
    {"quantize", hearth::cli::cmd_quantize,
     "convert a model's weight matrices to another type (q4_k_m, q8_0, ...)"},
    {"chat", hearth::cli::cmd_chat, "interactive chat in the terminal"},
    {"serve", hearth::cli::cmd_serve, "OpenAI-compatible HTTP server"},
};

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: hearth <command> [options]   (hearth <command> --help for details)\n\ncommands:\n");
  for (const auto& c : kCommands) {
    std::fprintf(out, "  %-11.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.help.size()), c.help.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 1;
  }
  const std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(stdout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (c.name == name) return c.main(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "hearth: error: unknown command '%s' (see hearth --help)\n", argv[1]);
  return 1;
}
