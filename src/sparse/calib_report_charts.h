// Internal to the calibration report: per-layer statistics and the charts built from them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sparse/calib_report.h"

namespace hearth::sparse::calib {

constexpr double kHotShare =
    0.2;  // the "hottest 20%" that PowerInfer's placement argument rests on

struct LayerStats {
  std::vector<double> sorted;           // firing frequencies, hottest first, clamped to [0, 1]
  std::vector<double> cum;              // cum[i]: sum of the i hottest frequencies (size n + 1)
  double never = 0;                     // share of neurons that never fired
  double hot = CalibLayerReport::kNaN;  // share of all activations covered by the hottest kHotShare
};

// The log axis shared by all frequency charts, so that layers compare at a glance.
struct FreqRange {
  double floor = 1e-4;    // where zero frequencies are drawn
  double lo = 1e-4;       // the axis' lower end: a power of ten at or below everything drawn
  bool any_zero = false;  // some neuron never fired
};

FreqRange freq_range(const CalibReport& r, const std::vector<LayerStats>& stats);

// "12.5%", or "n/a" for NaN.
std::string percent(double share, int decimals);

// A bare <svg> for the grid of small multiples.
std::string freq_chart(size_t layer, const LayerStats& s, FreqRange range);
// Framed charts (a <div> holding one <svg>).
std::string coverage_chart(const std::vector<LayerStats>& stats);
std::string quality_chart(const CalibReport& r);
std::string sparsity_chart(const CalibReport& r, bool predicted);
std::string loss_chart(const CalibReport& r);

}  // namespace hearth::sparse::calib
