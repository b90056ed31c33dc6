// hearth run: complete a prompt. stdout carries exactly the prompt followed by the generated text;
// everything else (load info, timings) goes to stderr, so the output can be piped.
#include <cstdio>
#include <string>
#include <vector>

#include "cli_common.h"
#include "device_flags.h"
#include "elapsed.h"
#include "commands.h"
#include "core/error.h"
#include "hearth/sampling.h"
#include "sampling/sampler.h"

namespace hearth::cli {
namespace {

void write_out(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int cmd_run(int argc, char** argv) {
  CLI::App app("Generate text that continues a prompt", "run");
  std::string model_path, prompt, prompt_file;
  int32_t n_predict = 128;
  SamplingFlags smp;
  SessionFlags sf;
  DeviceFlags df;
  std::string trace_path;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("-f,--file", prompt_file, "read the prompt from a file");
  app.add_option("-n,--n-predict", n_predict, "tokens to generate (-1 = until the context is full)")
      ->check(CLI::Range(-1, 1 << 30))->capture_default_str();
  smp.add_to(app);
  sf.add_to(app);
  df.add_to(app);
  app.add_option("--trace", trace_path,
                 "write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the host's and the "
                 "device's work to FILE")->type_name("FILE");
  return run_app(app, argc, argv, [&] {
    const SamplerParams sp = smp.resolve();
    const std::string text = read_prompt(prompt, prompt_file);

    const auto t_load = Clock::now();
    const auto model = load_model(model_path, sf, df);
    SessionOptions so = sf.options();
    so.trace = !trace_path.empty();
    Session session(model, so);
    std::vector<int32_t> tokens = model->tokenize(text, model->add_bos_default(), true);
    if (tokens.empty()) fail("the prompt is empty and the model adds no BOS token");
    if (static_cast<int64_t>(tokens.size()) >= session.n_ctx()) {
      fail("the prompt is ", tokens.size(), " tokens, which does not fit in the context of ",
           session.n_ctx(), " tokens (raise -c)");
    }
    print_load_info(model_path, *model, session, seconds_since(t_load));
    const ModelConfig& c = model->config();

    write_out(text);

    Sampler sampler(sp, static_cast<int32_t>(c.n_vocab));
    for (const int32_t t : tokens) sampler.accept(t);
    std::vector<float> logits(static_cast<size_t>(c.n_vocab));

    const auto t_prompt = Clock::now();
    auto out = session.eval_prompt(tokens);
    const double prompt_s = seconds_since(t_prompt);

    // The first piece after an empty prompt carries the tokenizer's dummy-prefix space.
    bool strip_space = text.empty() && model->adds_space_prefix();
    int32_t n_gen = 0;
    const auto t_gen = Clock::now();
    while (n_predict < 0 || n_gen < n_predict) {
      logits.assign(out.begin(), out.end());
      const int32_t next = sampler.sample(logits);
      if (model->is_eog(next)) break;
      sampler.accept(next);
      ++n_gen;
      std::string piece = model->token_to_piece(next);
      if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
      strip_space = strip_space && piece.empty();
      write_out(piece);
      if (session.n_past() >= session.n_ctx()) {
        std::fprintf(stderr, "\nhearth: the context is full (%d tokens)\n", session.n_ctx());
        break;
      }
      out = session.eval({&next, 1});
    }
    const double gen_s = seconds_since(t_gen);
    std::fprintf(stderr, "hearth: prompt %zu tokens in %.3f s (%.2f tokens/s); generated %d tokens in %.3f s (%.2f tokens/s)\n",
                 tokens.size(), prompt_s, tokens.size() / prompt_s, n_gen, gen_s,
                 n_gen > 0 ? n_gen / gen_s : 0.0);
    if (session.sparse_mode() != SparseMode::Dense) {
      const SparseStats& st = session.sparse_stats();
      std::fprintf(stderr, "hearth: sparse mode %s: FFN sparsity %.3f (%.1f of %lld neurons per layer and token)\n",
                   to_string(session.sparse_mode()).c_str(), st.sparsity(),
                   st.tokens ? static_cast<double>(st.neurons_active) / st.tokens / c.n_layer : 0.0,
                   (long long)c.n_ff);
    }
    if (!trace_path.empty()) {
      session.write_trace(trace_path);
      std::fprintf(stderr, "hearth: trace written to %s", trace_path.c_str());
      if (!model->device_name().empty()) {
        std::fprintf(stderr, " (device busy %.0f%% of the time)", 100 * session.device_busy_fraction());
      }
      std::fprintf(stderr, "\n");
    }
    return 0;
  });
}

}  // namespace hearth::cli
