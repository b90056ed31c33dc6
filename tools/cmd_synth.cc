// hearth synth: write a random Llama-shaped model (tests and benchmarks make their models with it).
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "model/config.h"
#include "model/synth.h"

namespace hearth::cli {

int cmd_synth(int argc, char** argv) {
  CLI::App app("Write a Llama-shaped GGUF model with random weights", "synth");
  SynthOptions o;
  std::string out, type = "f16", act = "silu";
  app.add_option("-o,--output", out, "output GGUF file")->required();
  app.add_option("--n-embd", o.n_embd, "hidden size")->capture_default_str();
  app.add_option("--n-layer", o.n_layer, "layers")->capture_default_str();
  app.add_option("--n-ff", o.n_ff, "FFN width")->capture_default_str();
  app.add_option("--n-head", o.n_head, "attention heads")->capture_default_str();
  app.add_option("--n-head-kv", o.n_head_kv, "KV heads (grouped-query attention)")->capture_default_str();
  app.add_option("--n-vocab", o.n_vocab, "vocabulary size")->capture_default_str();
  app.add_option("--n-ctx", o.n_ctx, "context length written to the file")->capture_default_str();
  app.add_option("--type", type, "weight type")->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}))->capture_default_str();
  app.add_option("--act", act, "FFN activation (gated)")->check(CLI::IsMember({"silu", "relu"}))->capture_default_str();
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  return run_app(app, argc, argv, [&] {
    o.type = *parse_dtype(type);
    o.act = parse_ffn_activation(act, "--act");
    write_synthetic_model(o, out);
    std::fprintf(stderr, "hearth synth: wrote %s\n", out.c_str());
    return 0;
  });
}

}  // namespace hearth::cli
