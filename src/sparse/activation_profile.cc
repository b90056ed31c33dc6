#include "sparse/activation_profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace hearth::sparse {
namespace {

constexpr int kOctaves = MagnitudeHistogram::kMaxExp - MagnitudeHistogram::kMinExp;
// Bin 0: |x| < 2^kMinExp; bins 1..kOctaves*kBinsPerOctave: the log-spaced range; the last
// bin: |x| >= 2^kMaxExp.
constexpr int kBins = kOctaves * MagnitudeHistogram::kBinsPerOctave + 2;

// The lower edge of bin b >= 1.
double bin_low(int b) {
  return std::exp2(MagnitudeHistogram::kMinExp +
                   static_cast<double>(b - 1) / MagnitudeHistogram::kBinsPerOctave);
}

}  // namespace

MagnitudeHistogram::MagnitudeHistogram() : bins_(kBins, 0) {}

void MagnitudeHistogram::add(const float* x, int64_t n) {
  const float lo = std::exp2f(kMinExp), hi = std::exp2f(kMaxExp);
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    int b;
    if (!(a >= lo)) {
      b = 0;  // also NaN: never a reason to keep a neuron
    } else if (a >= hi) {
      b = kBins - 1;
    } else {
      b = 1 + static_cast<int>((std::log2(a) - kMinExp) * kBinsPerOctave);
      b = b < 1 ? 1 : (b > kBins - 2 ? kBins - 2 : b);
    }
    ++bins_[static_cast<size_t>(b)];
  }
  total_ += static_cast<uint64_t>(n);
}

void MagnitudeHistogram::set_bins(std::vector<uint64_t> bins) {
  if (bins.size() != static_cast<size_t>(kBins)) {
    fail("a magnitude histogram has ", bins.size(), " bins, expected ", kBins);
  }
  bins_ = std::move(bins);
  total_ = 0;
  for (const uint64_t c : bins_) total_ += c;
}

float MagnitudeHistogram::quantile(double q) const {
  if (total_ == 0 || q <= 0) return 0.0f;
  const double want = std::min(q, 1.0) * static_cast<double>(total_);
  double below = 0;
  for (int b = 0; b < kBins; ++b) {
    const double c = static_cast<double>(bins_[static_cast<size_t>(b)]);
    if (below + c >= want && c > 0) {
      if (b == 0) return static_cast<float>(bin_low(1));
      if (b == kBins - 1) return std::exp2f(kMaxExp);
      // Values spread evenly (in log space) over the bin.
      const double frac = (want - below) / c;
      return static_cast<float>(bin_low(b) * std::exp2(frac / kBinsPerOctave));
    }
    below += c;
  }
  return std::exp2f(kMaxExp);
}

ActivationProfiler::ActivationProfiler(int64_t n_layer, int64_t n_embd, int64_t n_ff,
                                       const ProfileOptions& o)
    : n_embd_(n_embd), n_ff_(n_ff), opt_(o), layers_(static_cast<size_t>(n_layer)),
      row_(static_cast<size_t>(n_ff)), h_(static_cast<size_t>(n_ff)) {
  for (const auto* t : {&o.thresholds, &o.down_thresholds}) {
    if (!t->empty() && static_cast<int64_t>(t->size()) != n_layer) {
      fail("profiling needs one threshold per layer (got ", t->size(), " for ", n_layer,
           " layers)");
    }
  }
  for (size_t il = 0; il < layers_.size(); ++il) {
    Layer& l = layers_[il];
    l.fired.assign(static_cast<size_t>(n_ff), 0);
    l.samples.n_embd = n_embd;
    l.samples.n_ff = n_ff;
    // One stream per layer, so each layer's reservoir depends only on its own samples.
    l.rng.seed(o.seed * 0x9E3779B97F4A7C15ull + il);
  }
}

void ActivationProfiler::observe(int32_t layer, int64_t n, const float* p, const float* act,
                                 const float* h) {
  Layer& l = layers_.at(static_cast<size_t>(layer));
  const auto at = static_cast<size_t>(layer);
  const float t = opt_.thresholds.empty() ? 0.0f : opt_.thresholds[at];
  const float td = opt_.down_thresholds.empty() ? -1.0f : opt_.down_thresholds[at];
  for (int64_t tok = 0; tok < n; ++tok) {
    const float* a = act + tok * n_ff_;
    const float* ht = h + tok * n_ff_;
    for (int64_t i = 0; i < n_ff_; ++i) {
      const bool first = std::fabs(a[i]) > t;
      h_[static_cast<size_t>(i)] = first ? ht[i] : 0.0f;
      const uint8_t f = first && std::fabs(ht[i]) > td ? 1 : 0;
      row_[static_cast<size_t>(i)] = f;
      l.fired[static_cast<size_t>(i)] += f;
    }
    if (opt_.histograms) {
      l.hist.add(a, n_ff_);
      l.hist_h.add(h_.data(), n_ff_);
    }
    if (opt_.max_samples > 0) keep_sample(l, p + tok * n_embd_, row_.data());
  }
  l.tokens += static_cast<uint64_t>(n);
}

// Reservoir sampling (Vitter's algorithm R): every token seen so far is kept with the same
// probability, in bounded memory.
void ActivationProfiler::keep_sample(Layer& l, const float* p, const uint8_t* fired) {
  const uint64_t seen = l.seen++;
  if (l.samples.size() < opt_.max_samples) {
    l.samples.add(p, fired);
    return;
  }
  const uint64_t j = std::uniform_int_distribution<uint64_t>(0, seen)(l.rng);
  if (j >= static_cast<uint64_t>(opt_.max_samples)) return;
  std::memcpy(l.samples.x.data() + j * n_embd_, p, static_cast<size_t>(n_embd_) * sizeof(float));
  std::memcpy(l.samples.fired.data() + j * n_ff_, fired, static_cast<size_t>(n_ff_));
}

std::vector<float> ActivationProfiler::frequencies(int64_t layer) const {
  const Layer& l = layers_.at(static_cast<size_t>(layer));
  std::vector<float> f(static_cast<size_t>(n_ff_), 0.0f);
  if (l.tokens == 0) return f;
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<float>(static_cast<double>(l.fired[i]) / static_cast<double>(l.tokens));
  }
  return f;
}

double ActivationProfiler::sparsity(int64_t layer) const {
  const Layer& l = layers_.at(static_cast<size_t>(layer));
  if (l.tokens == 0) return 0.0;
  uint64_t fired = 0;
  for (const uint64_t c : l.fired) fired += c;
  return 1.0 - static_cast<double>(fired) / (static_cast<double>(l.tokens) * n_ff_);
}

}  // namespace hearth::sparse
