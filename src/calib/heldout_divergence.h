// How far given model-wide thresholds move a model from its dense self, on held-out text: what the
// greedy search of calib/input_sparsity.h weighs its candidate steps by.
//
// The measure is the mean KL divergence of the sparse model's next-token distributions from the
// dense model's, over every held-out position. Against the loss of the text's own next tokens
// (perplexity's measure), it counts every change a threshold makes to a distribution rather than
// the change at one token, so the thousand or so held-out tokens a search can afford to evaluate
// hundreds of times rank close candidates more reliably (docs/benchmarks.md compares the two).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hearth/model.h"

namespace hearth::calib {

class HeldoutDivergence {
 public:
  struct Result {
    double nll = 0;                // mean loss per token of the text's next tokens
    double kl = 0;                 // mean KL(dense || sparse) per position; 0 for the dense model
    std::vector<double> achieved;  // [n_layer] share of thresholded weights skipped
  };

  // Runs the dense model over `tokens` in windows of `window` (each from an empty context, as
  // calib/windows.h runs them) and keeps its next-token distributions: n_vocab F16 values per
  // position.
  HeldoutDivergence(std::shared_ptr<const Model> model, std::span<const int32_t> tokens,
                    int64_t window, int n_threads);

  const Result& dense() const { return dense_; }

  // The same windows with every token sparsified by `thresholds` (as perplexity measures
  // --sparse threshold), on the file's own matrices.
  Result measure(const std::vector<LayerThresholds>& thresholds);

  int64_t evaluations() const { return evaluations_; }  // the dense run included

 private:
  Result run(const std::vector<LayerThresholds>* thresholds);

  std::shared_ptr<const Model> model_;
  std::span<const int32_t> tokens_;
  int64_t window_;
  int n_threads_;
  // [positions, n_vocab] the dense model's next-token probabilities in F16: half the memory of
  // floats, and a rounding that is the same for every candidate a search compares
  std::vector<uint16_t> reference_;
  double dense_cross_ = 0;  // the dense model's entropy, summed as the cross-entropies are
  Result dense_;
  int64_t evaluations_ = 0;
};

}  // namespace hearth::calib
