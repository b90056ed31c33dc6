// hearth perplexity: llama.cpp's perplexity over a text file (src/eval/perplexity.h has the method),
// optionally against a dense baseline (--kl-base): mean KL(dense || mode) and top-1 agreement.
// Progress goes to stderr; the results go to stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.h"
#include "device_flags.h"
#include "elapsed.h"
#include "commands.h"
#include "core/error.h"
#include "eval/perplexity.h"

namespace hearth::cli {

int cmd_perplexity(int argc, char** argv) {
  CLI::App app("Perplexity of a model on a text (llama.cpp's method), optionally against dense",
               "perplexity");
  std::string model_path, text_file;
  int64_t max_chunks = -1;
  bool kl_base = false;
  bool dense_context = false;
  SessionFlags sf;
  DeviceFlags df;
  sf.n_ctx = 512;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-f,--file", text_file, "text to evaluate")->required();
  app.add_option("--chunks", max_chunks, "evaluate at most N chunks (-1 = all)")->capture_default_str();
  app.add_flag("--kl-base", kl_base,
               "also run a dense session on the same chunks and report KL(dense || mode), top-1 "
               "agreement and the dense perplexity");
  app.add_flag("--dense-context", dense_context,
               "evaluate each chunk as a generation sees it: its unscored first half as one prompt "
               "(dense, as run and serve do with --dense-prompt), the scored half one "
               "decode step at a time");
  sf.add_to(app);
  df.add_to(app);
  app.get_option("--ctx-size")
      ->description("tokens per chunk (0 = the model's context, at most 4096)")
      ->capture_default_str();
  return run_app(app, argc, argv, [&] {
    const std::string text = read_text_file(text_file, "text file");
    // The dense baseline's session reads the file's matrices.
    if (kl_base) sf.keep_matrices = true;
    const auto model = load_model(model_path, sf, df);
    const ModelConfig& c = model->config();
    SessionOptions o = sf.options();
    if (o.n_ctx == 0) o.n_ctx = static_cast<int32_t>(std::min<int64_t>(c.n_ctx_train, 4096));
    if (o.n_ctx > c.n_ctx_train) {
      fail("-c ", o.n_ctx, " exceeds the model's context of ", c.n_ctx_train, " tokens");
    }
    // As llama.cpp: the whole text with BOS at its start, and each chunk starting with BOS.
    const bool add_bos = model->add_bos_default();
    const std::vector<int32_t> tokens = model->tokenize(text, add_bos);
    const eval::ChunkPlan plan = eval::plan_chunks(static_cast<int64_t>(tokens.size()), o.n_ctx,
                                                   max_chunks > 0 ? max_chunks : 0);
    // The mode on every token, unless the context is to be a dense prompt.
    o.sparse_prompt = !dense_context && !sf.dense_prompt;
    Session session(model, o);
    std::unique_ptr<Session> dense;
    if (kl_base) {
      SessionOptions d = o;
      d.sparse = SparseMode::Dense;
      dense = std::make_unique<Session>(model, d);
    }
    const std::string mode = to_string(session.sparse_mode());
    std::fprintf(stderr,
                 "hearth perplexity: %s: %zu tokens, %lld chunks of %lld (scoring %lld tokens each), "
                 "sparse %s%s, %d threads\n",
                 text_file.c_str(), tokens.size(), (long long)plan.n_chunks, (long long)plan.n_ctx,
                 (long long)plan.scored_per_chunk(), mode.c_str(), kl_base ? " vs dense" : "",
                 session.n_threads());

    const size_t n_vocab = static_cast<size_t>(c.n_vocab);
    std::vector<float> logits(static_cast<size_t>(plan.n_ctx) * n_vocab);
    std::vector<float> base_logits(kl_base ? logits.size() : 0);
    eval::MeanStat nll, dense_nll, kl;
    uint64_t same_top1 = 0;
    session.reset_stats();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < plan.n_chunks; ++i) {
      const auto input = eval::chunk_input(tokens, plan, i, add_bos ? model->bos() : -1);
      const std::span<const int32_t> targets(tokens.data() + i * plan.n_ctx,
                                             static_cast<size_t>(plan.n_ctx));
      session.reset();
      if (dense_context) {
        const auto first = static_cast<size_t>(plan.first);
        session.eval_prompt(std::span(input).first(first));
        for (size_t t = first; t + 1 < input.size(); ++t) {
          const std::span<const float> row = session.eval(std::span(input).subspan(t, 1));
          std::copy(row.begin(), row.end(), logits.begin() + static_cast<ptrdiff_t>(t * n_vocab));
        }
      } else {
        session.eval_all(input, logits);
      }
      eval::score_chunk(plan, targets, logits, c.n_vocab, nll);
      if (dense) {
        dense->reset();
        dense->eval_all(input, base_logits);
        eval::score_chunk(plan, targets, base_logits, c.n_vocab, dense_nll);
        eval::compare_chunk(plan, base_logits, logits, c.n_vocab, kl, same_top1);
      }
      const double so_far = eval::perplexity(nll).value;
      std::fprintf(stderr, "[%lld]%.4f,", (long long)(i + 1), so_far);
      std::fflush(stderr);
      // NaN or infinite logits (a broken model file) give no perplexity: fail, do not print one.
      if (!std::isfinite(so_far) || (dense && !std::isfinite(eval::perplexity(dense_nll).value))) {
        std::fprintf(stderr, "\n");
        fail("chunk ", i + 1, ": the ", std::isfinite(so_far) ? "dense " : "",
             "model's log-likelihood is not finite (NaN or infinite logits); no perplexity");
      }
    }
    const double seconds = seconds_since(t0);
    std::fprintf(stderr, "\nhearth perplexity: %llu tokens scored in %.2f s\n",
                 (unsigned long long)nll.count(), seconds);

    const eval::Perplexity ppl = eval::perplexity(nll);
    std::printf("PPL = %.4f +/- %.5f\n", ppl.value, ppl.error);
    if (session.sparse_mode() != SparseMode::Dense) {
      const SparseStats& s = session.sparse_stats();
      if (s.neurons_total > 0) {
        std::printf("sparsity = %.4f (%llu of %llu FFN neurons computed over %llu tokens)\n",
                    s.sparsity(), (unsigned long long)s.neurons_active,
                    (unsigned long long)s.neurons_total, (unsigned long long)s.tokens);
      } else {
        std::printf("sparsity = n/a (the session counted no sparse FFN work)\n");
      }
      if (!s.inputs.empty()) {
        double lo = 1, hi = 0;
        for (size_t l = 0; l < s.inputs.size(); ++l) {
          lo = std::min(lo, s.input_sparsity(static_cast<int32_t>(l)));
          hi = std::max(hi, s.input_sparsity(static_cast<int32_t>(l)));
        }
        std::printf("input sparsity = %.4f of the thresholded weights skipped (per layer %.4f to "
                    "%.4f)\n", s.input_sparsity(), lo, hi);
      }
    }
    if (dense) {
      const eval::Perplexity d = eval::perplexity(dense_nll);
      std::printf("KL divergence = %.6g +/- %.6g\n", kl.mean(), kl.standard_error());
      std::printf("top-1 agreement = %.3f%%\n",
                  kl.count() ? 100.0 * static_cast<double>(same_top1) / kl.count() : 0.0);
      std::printf("dense PPL = %.4f +/- %.5f\n", d.value, d.error);
    }
    return 0;
  });
}

}  // namespace hearth::cli
