// The calibration pipeline behind `hearth calibrate` (issue 4): profile a model's activations on
// text with a dense session, then either train predictors (ReLU-family models) or choose
// per-layer magnitude thresholds (training-free: model-wide on every projection's input,
// calib/input_sparsity.h, or on the FFN alone), and measure the result on held-out tokens. It drives the public Session API with an
// ActivationProfiler attached, so it sits above the model layer; the math lives in src/sparse/.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "calib/input_sparsity.h"
#include "hearth/model.h"
#include "sparse/calib_report.h"
#include "sparse/predictor_train.h"

namespace hearth::calib {

// Thresholds: the FFN's two stages (gate, then down; --scope ffn). InputThresholds: every
// projection's input (--scope model). ProfileOnly: activation statistics, plus the predictor
// samples (--stage profile).
enum class CalibKind { Auto, Predictors, Thresholds, InputThresholds, ProfileOnly };

struct CalibrateOptions {
  CalibKind kind = CalibKind::Auto;  // Auto: InputThresholds when `sparsity` is set, else Predictors
  std::string text;                  // calibration text
  std::string heldout_text;          // empty: the last `heldout_share` of the text's tokens
  double heldout_share = 0.1;
  int64_t max_tokens = 0;      // calibration tokens to profile (0: all)
  int64_t max_heldout = 8192;  // held-out tokens evaluated at most
  int64_t window = 256;        // tokens per evaluation window (the context restarts per window)
  int n_threads = 1;
  uint64_t seed = 1;
  // Predictors.
  std::vector<int64_t> ranks;  // candidate widths (empty: auto from n_embd)
  double target_recall = 0.95;
  int epochs = 20;
  int64_t max_samples = 65536;  // per layer, capped by a memory budget of 1 GiB
  // InputThresholds: the share of each layer's weights skipped (calib/input_sparsity.h).
  // Thresholds: the share of neurons per layer whose down row is skipped (|act(gate) · up| small),
  // and of those the share skipped already by the gate alone (|act(gate)| small: their up rows
  // are not read either; NaN: 0.4 * sparsity).
  double sparsity = std::numeric_limits<double>::quiet_NaN();
  double gate_sparsity = std::numeric_limits<double>::quiet_NaN();
  // InputThresholds: layers allocated together (0: auto) and held-out tokens the search
  // evaluates at most.
  int64_t layer_groups = 0;
  int64_t search_tokens = 1024;
  Allocate allocate = Allocate::Speed;  // what the search weighs divergence against
  // InputThresholds on a rotated stream: steps refining the principal axes for thresholds a
  // little above `sparsity` (calib/residual_rotation.h, rotate_for_calibration; 0: the principal
  // axes alone).
  int64_t rotation_steps = 150;
  // Progress lines for the terminal (may be empty).
  std::function<void(const std::string&)> log;
};

struct LayerPredictor {
  int64_t rank = 0;
  std::vector<float> fc1;  // [rank, n_embd], values rounded to f16 (as written)
  std::vector<float> fc2;  // [n_ff, rank]
  float threshold = 0;
};

// A profile for predictor training, per layer: firing frequencies and sparsity on the calibration
// tokens, reservoir-sampled (input, fired) pairs from them, and the held-out tokens' pairs.
struct ProfileData {
  int64_t tokens = 0, heldout_tokens = 0;
  std::vector<std::vector<float>> freq;  // [n_layer][n_ff]
  std::vector<double> sparsity;          // [n_layer]
  std::vector<sparse::PredictorSamples> train, heldout;
};

struct CalibrationResult {
  CalibKind kind = CalibKind::Predictors;
  sparse::CalibReport report;               // per layer: frequencies, quality, thresholds
  std::vector<LayerPredictor> predictors;   // Predictors: one per layer
  std::vector<LayerThresholds> thresholds;  // Thresholds, InputThresholds: one per layer
  ProfileData profile;                      // ProfileOnly: saved with the file for --stage train
  int64_t heldout_tokens = 0;
};

// Runs the whole pipeline on a loaded model. Throws hearth::Error on bad input (a text that is
// not UTF-8 or too short for the windows, a kind the model cannot take, bad options).
CalibrationResult calibrate(const std::shared_ptr<const Model>& model, const CalibrateOptions& o);

// The tokens calibrate() profiles (o.text, without the held-out share, at most o.max_tokens);
// throws hearth::Error as calibrate() does for a text too short.
std::vector<int32_t> training_tokens(const Model& model, const CalibrateOptions& o);

// --stage train: predictors from the profile a ProfileOnly run saved in `profile` (a calibrated
// file: the model plus the samples), without profiling again. Same result as one calibrate().
CalibrationResult train_from_profile(const std::shared_ptr<const Model>& profile,
                                     const CalibrateOptions& o);

// The profile saved in a --stage profile file; throws when the file has none.
ProfileData read_profile(const Model& model);

// Writes `out`: the model's metadata and tensors, plus what calibration made (predictors or
// thresholds, activation statistics; docs/formats.md). Written to a temporary file and renamed,
// so an interrupted run never leaves a half-written `out`.
void write_calibrated_model(const Model& model, const CalibrationResult& r, const std::string& out);

// The report of a calibrated file (its statistics keys and tensors); throws when it has none.
sparse::CalibReport read_calib_report(const Model& model);

// Candidate predictor widths for a model of this size: powers of two from n_embd / 64 (at least
// 8) to n_embd / 2 (at most 1024; up to n_embd for models narrower than 64).
std::vector<int64_t> default_ranks(int64_t n_embd);

}  // namespace hearth::calib
