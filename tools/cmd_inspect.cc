// hearth inspect MODEL: what a GGUF file holds, readable by a person. Works on any valid GGUF
// (vocab-only files, unsupported architectures): each section says why it cannot be shown.
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "text/tokenizer.h"

namespace hearth::cli {
namespace {

std::string shape_of(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

void print_config(const gguf::GgufFile& file) {
  std::printf("\nhyper-parameters:\n");
  try {
    ModelConfig c = read_config(file);
    bind_weights(file, c);
    std::printf("  architecture     %s%s%s\n", c.arch.c_str(), c.name.empty() ? "" : "  name ", c.name.c_str());
    std::printf("  n_vocab %lld  n_embd %lld  n_layer %lld  n_ff %lld\n", (long long)c.n_vocab,
                (long long)c.n_embd, (long long)c.n_layer, (long long)c.n_ff);
    std::printf("  n_head %lld  n_head_kv %lld  head_dim %lld  n_rot %lld  n_ctx_train %lld\n",
                (long long)c.n_head, (long long)c.n_head_kv, (long long)c.head_dim,
                (long long)c.n_rot, (long long)c.n_ctx_train);
    std::printf("  norm %s, eps %g  rope %s, freq_base %g\n", to_string(c.norm).c_str(),
                c.norm_eps, to_string(c.rope_type).c_str(), c.rope_freq_base);
    std::printf("  ffn %s%s  output %s\n", c.ffn_gated ? "gated " : "", to_string(c.ffn_act).c_str(),
                c.tied_output ? "tied to token_embd" : "separate");
  } catch (const Error& e) {
    std::printf("  (not a model Hearth can run: %s)\n", e.what());
  }
}

void print_tokenizer(const gguf::GgufFile& file) {
  std::printf("\ntokenizer:\n");
  try {
    const auto tok = text::Tokenizer::from_gguf(file);
    std::printf("  model %s  n_vocab %d  bos %d  eos %d  add_bos %s\n",
                std::string(tok->model()).c_str(), tok->n_vocab(), tok->bos(), tok->eos(),
                tok->add_bos_default() ? "yes" : "no");
  } catch (const Error& e) {
    std::printf("  (none usable: %s)\n", e.what());
  }
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  CLI::App app("Show a GGUF file's metadata, hyper-parameters, tokenizer and tensors", "inspect");
  std::string path;
  size_t max_elems = 8;
  app.add_option("model", path, "GGUF file")->required();
  app.add_option("--max-array", max_elems, "array elements shown per metadata value");
  return run_app(app, argc, argv, [&] {
    const auto file = gguf::GgufFile::open(path);
    std::printf("file: %s\n  %s v%u, %llu bytes, alignment %llu, %zu metadata keys, %zu tensors\n",
                path.c_str(), file->is_powerinfer() ? "PowerInfer GGUF (PWRI)" : "GGUF",
                file->version(), (unsigned long long)file->file_size(),
                (unsigned long long)file->alignment(), file->metadata().size(), file->tensors().size());
    std::printf("\nmetadata:\n");
    for (const auto& [key, value] : file->metadata()) {
      std::printf("  %-44s %s\n", key.c_str(), gguf::GgufFile::format_value(value, max_elems).c_str());
    }
    print_config(*file);
    print_tokenizer(*file);
    std::printf("\ntensors:\n");
    uint64_t total = 0;
    for (const auto& t : file->tensors()) {
      const auto info = ggml_type_info(t.type);
      std::printf("  %-36s %-6s %-20s %12llu bytes\n", t.name.c_str(),
                  info ? std::string(info->name).c_str() : "?", shape_of(t).c_str(),
                  (unsigned long long)t.nbytes);
      total += t.nbytes;
    }
    std::printf("  total %llu bytes in %zu tensors\n", (unsigned long long)total, file->tensors().size());
    return 0;
  });
}

}  // namespace hearth::cli
