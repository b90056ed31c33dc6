// Activation profiling (calibration, DESIGN.md section 1): a dense session runs over text with an
// ActivationProfiler attached, which records per layer and neuron how often it fires, and what
// the later stages need: samples of the predictor input with the neurons that fired (predictor
// training, ReLU-family models) or a histogram of activation magnitudes (thresholds, SwiGLU).
//
// "Fires" means |act| > the layer's threshold: 0 for ReLU-family models (a non-zero activation,
// what the oracle computes), the calibrated magnitude threshold for SwiGLU ones, where it must
// also pass the down threshold on |h| = |act(gate) · up| (SparseMode::Threshold's two stages).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "hearth/session.h"
#include "sparse/predictor_train.h"

namespace hearth::sparse {

// A log-scale histogram of |x| with kBinsPerOctave bins per power of two: quantiles to within
// 1.1% of the value in constant memory, whatever the number of tokens.
class MagnitudeHistogram {
 public:
  static constexpr int kBinsPerOctave = 64;
  static constexpr int kMinExp = -48;  // |x| below 2^-48 (and 0) share bin 0
  static constexpr int kMaxExp = 16;   // |x| at or above 2^16 share the last bin
  MagnitudeHistogram();
  void add(const float* x, int64_t n);
  uint64_t count() const { return total_; }
  // The smallest t such that a share >= q of the values have |x| <= t (interpolated in the bin).
  float quantile(double q) const;
  const std::vector<uint64_t>& bins() const { return bins_; }
  void set_bins(std::vector<uint64_t> bins);  // from a saved profile

 private:
  std::vector<uint64_t> bins_;
  uint64_t total_ = 0;
};

struct ProfileOptions {
  // Per layer: a neuron fires iff |act| > thresholds[l] (empty: > 0) and, when given,
  // |h| > down_thresholds[l].
  std::vector<float> thresholds;
  std::vector<float> down_thresholds;
  // Predictor samples per layer: at most this many (p, fired) pairs, reservoir-sampled beyond
  // (0: none kept).
  int64_t max_samples = 0;
  // Magnitude histograms per layer: of |act|, and of |h| where act passes the threshold (0
  // where it does not, as the runtime's first stage zeroes it).
  bool histograms = false;
  uint64_t seed = 1;
};

class ActivationProfiler : public FfnObserver {
 public:
  ActivationProfiler(int64_t n_layer, int64_t n_embd, int64_t n_ff, const ProfileOptions& o);

  void observe(int32_t layer, int64_t n, const float* p, const float* act,
               const float* h) override;

  int64_t n_layer() const { return static_cast<int64_t>(layers_.size()); }
  int64_t n_ff() const { return n_ff_; }
  uint64_t tokens() const { return layers_.empty() ? 0 : layers_[0].tokens; }
  // Per neuron: the share of tokens it fired for. [n_ff]
  std::vector<float> frequencies(int64_t layer) const;
  // The share of (token, neuron) pairs that did not fire.
  double sparsity(int64_t layer) const;
  const PredictorSamples& samples(int64_t layer) const { return layers_[layer].samples; }
  const MagnitudeHistogram& histogram(int64_t layer) const { return layers_[layer].hist; }
  const MagnitudeHistogram& down_histogram(int64_t layer) const { return layers_[layer].hist_h; }

 private:
  struct Layer {
    uint64_t tokens = 0;
    std::vector<uint64_t> fired;  // [n_ff] counts
    PredictorSamples samples;
    uint64_t seen = 0;            // samples offered to the reservoir
    std::mt19937_64 rng;
    MagnitudeHistogram hist, hist_h;
  };
  void keep_sample(Layer& l, const float* p, const uint8_t* fired);

  int64_t n_embd_, n_ff_;
  ProfileOptions opt_;
  std::vector<Layer> layers_;
  std::vector<uint8_t> row_;  // [n_ff] the fired mask of one token
  std::vector<float> h_;      // [n_ff] h of one token after the first stage
};

}  // namespace hearth::sparse
