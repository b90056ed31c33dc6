// The HTML report of `hearth calibrate --report DIR`: what calibration measured, in a form a person
// can judge at a glance (is the activation power law there, do the predictors find the active
// neurons, how sparse is each layer). One self-contained index.html with inline SVG charts, so it
// opens offline, can be mailed or attached to an issue, and is byte-identical for the same input.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace hearth::sparse {

struct CalibLayerReport {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  // [n_ff] firing frequency of each neuron in [0, 1] over the profiled tokens.
  std::vector<float> freq;
  // Predictor quality on held-out tokens; NaN when the layer has no predictor (SwiGLU thresholds).
  double recall = kNaN, precision = kNaN, predicted_sparsity = kNaN;
  double true_sparsity = 0;    // share of (token, neuron) pairs that did not fire / below threshold
  int64_t predictor_rank = 0;  // 0: none
  double threshold = kNaN;     // the layer's predictor score threshold or magnitude threshold
  std::vector<float> loss;     // training loss per epoch (may be empty)
  // Model-wide thresholds: the share of each input's elements allocated to be skipped (attn_in,
  // attn_out, ffn_in, down_in); empty otherwise. true_sparsity is then the share of the layer's
  // thresholded weights skipped on held-out tokens.
  std::vector<double> input_share;
};

struct CalibReport {
  std::string model;   // file name
  std::string kind;    // "predictors" or "thresholds"
  int64_t tokens = 0;  // tokens profiled
  // Target recall (predictors) or target sparsity (thresholds).
  double target = CalibLayerReport::kNaN;
  std::vector<CalibLayerReport> layers;
};

// Writes dir/index.html (creating dir if needed); throws hearth::Error on I/O errors.
void write_calib_report(const CalibReport& r, const std::string& dir);

// The page as a string (what write_calib_report writes). Charts: one activation-frequency chart per
// layer, the hottest-k% coverage chart, predictor recall/precision (only when some layer has a
// predictor), sparsity per layer, and training loss (only when some layer has a loss curve).
std::string render_calib_report(const CalibReport& r);

}  // namespace hearth::sparse
