// hearth: one binary, one subcommand per job (llama.cpp-style flags).
#include <cstdio>
#include <cstring>
#include <string_view>

int main(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    std::fprintf(stderr, "usage: hearth <command> [options]\n");
    return argc < 2 ? 1 : 0;
  }
  std::fprintf(stderr, "hearth: unknown command '%s'\n", argv[1]);
  return 1;
}
