// hearth imatrix -m MODEL -f TEXT -o FILE: the importance matrix of a model on calibration text
// (src/calib/imatrix.h), for `hearth quantize --imatrix FILE`. The file is llama.cpp's imatrix
// GGUF layout. Progress goes to stderr.
#include <cstdio>
#include <filesystem>
#include <string>

#include "calib/imatrix.h"
#include "cli_common.h"
#include "commands.h"
#include "core/error.h"

namespace hearth::cli {

int cmd_imatrix(int argc, char** argv) {
  CLI::App app("Activation statistics of every weight matrix on a text, for quantize --imatrix "
               "(as llama-imatrix)", "imatrix");
  std::string model_path, text_file, out_path;
  calib::ImatrixOptions o;
  int32_t n_threads = 0;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-f,--file", text_file, "calibration text (not the text you evaluate on)")
      ->required();
  app.add_option("-o,--output", out_path, "the imatrix GGUF file to write")->required();
  app.add_option("-c,--ctx-size", o.window, "tokens per window (the context restarts per window)")
      ->capture_default_str();
  app.add_option("--tokens", o.max_tokens, "tokens to evaluate at most (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", n_threads, "threads (default: all)");
  bool no_gram = false;
  app.add_flag("--no-gram", no_gram,
               "only the per-column mean squares (llama.cpp's imatrix), no Gram matrices x x^T "
               "(which quantize uses for GPTQ; they take cols^2 * 4 bytes per matrix, kept while "
               "they total at most 1 GiB)");
  return run_app(app, argc, argv, [&] {
    o.n_threads = n_threads > 0 ? n_threads : default_threads();
    if (no_gram) o.gram_budget = 0;
    o.text = read_text_file(text_file, "calibration text");
    o.dataset_name = std::filesystem::path(text_file).filename().string();
    o.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    const auto model = Model::load(model_path);
    const Imatrix m = calib::collect_imatrix(model, o);
    write_imatrix(m, out_path);
    size_t grams = 0;
    for (const auto& [name, e] : m.entries) grams += e.gram.empty() ? 0 : 1;
    std::printf("wrote %s: %zu matrices (%zu with Gram matrices), %u windows of %u tokens from "
                "%s\n", out_path.c_str(), m.entries.size(), grams, m.chunk_count, m.chunk_size,
                o.dataset_name.c_str());
    return 0;
  });
}

}  // namespace hearth::cli
