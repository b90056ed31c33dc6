#include "calib/heldout_divergence.h"

#include <cmath>
#include <limits>

#include "calib/windows.h"
#include "core/fp16.h"
#include "eval/perplexity.h"
#include "hearth/session.h"

namespace hearth::calib {

HeldoutDivergence::HeldoutDivergence(std::shared_ptr<const Model> model,
                                     std::span<const int32_t> tokens, int64_t window, int n_threads)
    : model_(std::move(model)), tokens_(tokens), window_(window), n_threads_(n_threads) {
  // At most one scored position per token.
  reference_.reserve(tokens.size() * static_cast<size_t>(model_->config().n_vocab));
  dense_ = run(nullptr);
}

HeldoutDivergence::Result HeldoutDivergence::measure(
    const std::vector<LayerThresholds>& thresholds) {
  return run(&thresholds);
}

HeldoutDivergence::Result HeldoutDivergence::run(const std::vector<LayerThresholds>* thresholds) {
  ++evaluations_;
  SessionOptions so;
  so.n_threads = n_threads_;
  so.sparse = thresholds ? SparseMode::Threshold : SparseMode::Dense;
  so.sparse_prompt = true;
  // The thresholds themselves are weighed, on the file's matrices: a sparse prompt through
  // input-major copies would cost a search 2-3x the time for their rounding alone.
  so.input_major_min_width = std::numeric_limits<int32_t>::max();
  if (thresholds) so.thresholds = *thresholds;
  const bool keep_reference = thresholds == nullptr;
  const auto n_vocab = static_cast<size_t>(model_->config().n_vocab);
  std::vector<float> logits(static_cast<size_t>(window_ + 1) * n_vocab);  // [window + 1, n_vocab]
  std::vector<double> log_p(n_vocab);                                     // [n_vocab]
  double nll = 0, cross = 0;
  size_t position = 0;  // positions scored so far: reference_'s row
  const SparseStats stats =
      run_windows(model_, tokens_, so, window_, nullptr, "held-out divergence",
                  [&](Session& session, std::span<const int32_t> input) {
                    session.eval_all(input, logits);
                    for (size_t t = 0; t + 1 < input.size(); ++t, ++position) {
                      eval::log_softmax({logits.data() + t * n_vocab, n_vocab}, log_p);
                      nll -= log_p[static_cast<size_t>(input[t + 1])];
                      if (keep_reference) {
                        for (const double lp : log_p) {
                          reference_.push_back(fp32_to_fp16(static_cast<float>(std::exp(lp))));
                        }
                      }
                      // KL(dense || this) less the dense entropy, which the dense run's own sum
                      // cancels.
                      const uint16_t* p = reference_.data() + position * n_vocab;
                      for (size_t v = 0; v < n_vocab; ++v) cross -= fp16_to_fp32(p[v]) * log_p[v];
                    }
                  });
  Result r;
  for (int64_t l = 0; l < model_->config().n_layer; ++l) {
    r.achieved.push_back(stats.input_sparsity(static_cast<int32_t>(l)));
  }
  if (position == 0) return r;
  r.nll = nll / static_cast<double>(position);
  cross /= static_cast<double>(position);
  if (keep_reference) dense_cross_ = cross;
  r.kl = cross - dense_cross_;
  return r;
}

}  // namespace hearth::calib
