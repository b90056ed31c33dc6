// hearth synth: write a random Llama-shaped model (tests and benchmarks make their models with it).
// With --sparsity, a ReGLU model whose neurons fire with a power-law frequency, with predictors;
// its sparsity and predictor quality are then measured and printed (--no-measure skips that).
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "model/config.h"
#include "model/synth.h"
#include "model/synth_measure.h"

namespace hearth::cli {
namespace {

void print_report(const SynthSparsityReport& r, double target) {
  std::printf("measured on %lld random tokens (reference forward; target sparsity %.4g)\n",
              static_cast<long long>(r.n_tokens), target);
  std::printf("%-6s %9s %10s %7s %9s\n", "layer", "sparsity", "predicted", "recall", "precision");
  auto row = [](const std::string& name, const NeuronCounts& c) {
    std::printf("%-6s %9.4f %10.4f %7.4f %9.4f\n", name.c_str(), c.sparsity(),
                c.predicted_sparsity(), c.recall(), c.precision());
  };
  for (size_t i = 0; i < r.layers.size(); ++i) row(std::to_string(i), r.layers[i]);
  row("all", r.total);
  if (r.runtime_measured) {
    std::printf("runtime (--sparse predictor, audited): sparsity %.4f recall %.4f precision %.4f\n",
                r.runtime.sparsity(), r.runtime.recall(), r.runtime.precision());
  } else {
    std::printf("runtime (--sparse predictor): no neuron counts reported by the session\n");
  }
}

}  // namespace

int cmd_synth(int argc, char** argv) {
  CLI::App app("Write a Llama-shaped GGUF model with random weights", "synth");
  SynthOptions o;
  std::string out, type = "f16", act = "silu";
  double sparsity = 0.0;
  int64_t measure_tokens = 64;
  int64_t stats_tokens = 256;
  bool no_measure = false;
  int32_t threads = 0;
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
  app.add_option("--sparsity", sparsity,
                 "make a ReGLU model with predictors whose FFN neurons are inactive for this share "
                 "of tokens on average, in (0, 1); implies --act relu");
  app.add_option("--skew", o.skew,
                 "with --sparsity: power-law exponent of neuron firing frequency over rank, 0 (all "
                 "alike) to 4")->capture_default_str();
  app.add_option("--predictor-rank", o.predictor_width,
                 "with --sparsity: hidden width of each layer's predictor (default: up to n_embd/8, "
                 "within 8% of the FFN's bytes)");
  app.add_flag("--no-measure", no_measure, "with --sparsity: do not measure the written model");
  app.add_option("--measure-tokens", measure_tokens, "with --sparsity: random tokens to measure on")->capture_default_str();
  app.add_option("--stats-tokens", stats_tokens,
                 "with --sparsity: random tokens to measure each neuron's firing frequency on, "
                 "stored as blk.N.ffn_act_freq for the placement solver (0 = none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))->capture_default_str();
  app.add_option("-t,--threads", threads, "threads for measuring (default: all)");
  return run_app(app, argc, argv, [&] {
    o.type = *parse_dtype(type);
    const bool sparse = app.count("--sparsity") > 0;
    if (!sparse) {
      for (const char* flag :
           {"--skew", "--predictor-rank", "--no-measure", "--measure-tokens", "--stats-tokens"}) {
        if (app.count(flag) > 0) fail("synth: ", flag, " needs --sparsity");
      }
    } else {
      o.sparsity = sparsity;
      if (app.count("--act") == 0) act = "relu";
      if (measure_tokens <= 0) fail("synth: --measure-tokens must be positive (got ", measure_tokens, ")");
    }
    o.act = parse_ffn_activation(act, "--act");
    write_synthetic_model(o, out);
    if (sparse && stats_tokens > 0) {
      add_activation_stats(out, stats_tokens, o.seed + 2, threads > 0 ? threads : default_threads());
    }
    std::fprintf(stderr, "hearth synth: wrote %s\n", out.c_str());
    if (sparse && !no_measure) {
      print_report(measure_synth_sparsity(out, measure_tokens, o.seed + 1, threads), sparsity);
    }
    return 0;
  });
}

}  // namespace hearth::cli
