// hearth tokenize: the token ids of a text. Loads only the tokenizer, so vocab-only GGUF files work.
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

namespace hearth::cli {

int cmd_tokenize(int argc, char** argv) {
  CLI::App app("Print the token ids of a text", "tokenize");
  std::string model, prompt, file;
  bool ids_only = false, bos = false, parse_special = false;
  app.add_option("-m,--model", model, "GGUF model or vocabulary file")->required();
  app.add_option("-p,--prompt", prompt, "text to tokenize");
  app.add_option("-f,--file", file, "read the text from a file");
  app.add_flag("--ids", ids_only, "print only the ids, space-separated on one line");
  app.add_flag("--bos", bos, "prepend the BOS token");
  app.add_flag("--parse-special", parse_special, "turn special-token text (e.g. <s>) into its token");
  return run_app(app, argc, argv, [&] {
    const std::string text = read_prompt(prompt, file);
    const auto gguf_file = gguf::GgufFile::open(model);
    const auto tok = text::Tokenizer::from_gguf(*gguf_file);
    const auto ids = tok->encode(text, bos, parse_special);
    if (ids_only) {
      for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
      std::printf("\n");
    } else {
      for (const int32_t id : ids) {
        std::printf("%6d -> '%s'\n", id, tok->token_to_piece(id).c_str());
      }
    }
    return 0;
  });
}

}  // namespace hearth::cli
