#include "sparse/calib_report_charts.h"

#include <algorithm>
#include <cmath>

#include "sparse/svg_plot.h"

namespace hearth::sparse::calib {

namespace {

using svg::fixed;

constexpr const char* kBlue = "#1f77b4";
constexpr const char* kOrange = "#e6730f";
constexpr const char* kRed = "#c0392b";

// The ranks a curve is drawn through: a few hundred points keep an 80-layer report small. Evenly
// spaced ranks miss the steep head of a power law, so log-spaced ranks are added there.
std::vector<size_t> sample_ranks(size_t n) {
  constexpr size_t kEven = 160, kLog = 80;
  std::vector<size_t> ranks;
  if (n <= kEven + kLog) {
    for (size_t i = 0; i < n; ++i) ranks.push_back(i);
    return ranks;
  }
  for (size_t j = 0; j < kEven; ++j) ranks.push_back(j * (n - 1) / (kEven - 1));
  for (size_t j = 0; j < kLog; ++j) {
    const double r =
        std::exp(static_cast<double>(j) * std::log(static_cast<double>(n)) / (kLog - 1));
    ranks.push_back(std::min(n - 1, static_cast<size_t>(r) - 1));
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

svg::Axis share_axis(const std::string& label) {
  svg::Axis a;
  a.label = label;
  a.tick_scale = 100;
  a.tick_suffix.push_back('%');  // not = "%": g++ 12 raises a false -Wrestrict on it
  return a;
}

// Charts with a bar or dot per layer widen with the layer count, up to the page width.
int per_layer_width(size_t n_layers) {
  return static_cast<int>(std::clamp<size_t>(14 * n_layers, 900, 1260));
}

svg::Axis layer_axis(size_t n_layers) {
  svg::Axis a;
  a.label = "layer";
  a.lo = -0.5;
  a.hi = static_cast<double>(n_layers) - 0.5;
  a.integer_ticks = true;
  a.max_ticks = 12;
  return a;
}

// A framed chart drawn at its own size (1 SVG unit = 1 CSS pixel) or narrower on a small window,
// so text is the same size in every chart.
std::string chart_box(const svg::Chart& c) {
  return "<div class=\"chart\" style=\"max-width:" + std::to_string(c.width) + "px\">" +
         svg::render(c) + "</div>\n";
}

// Per-layer curves overlaid: a colour per layer, named in the legend while there are few.
void add_layer_legend(svg::Chart& c, const std::vector<std::string>& colors) {
  if (colors.size() > 10) {
    c.legend = false;
    c.ramp = {colors, "layer 0", "layer " + std::to_string(colors.size() - 1)};
  }
}

svg::Series per_layer(const std::string& label, const char* color, svg::Style style,
                      const std::vector<CalibLayerReport>& layers,
                      double CalibLayerReport::*field) {
  svg::Series s;
  s.label = label, s.color = color, s.style = style;
  for (size_t l = 0; l < layers.size(); ++l) {
    const double v = layers[l].*field;
    s.x.push_back(static_cast<double>(l));
    s.y.push_back(v);
    s.tips.push_back("layer " + std::to_string(l) + " " + label + ": " + fixed(v, 3));
  }
  return s;
}

}  // namespace

// Zeros go below every measurable frequency (one firing in `tokens` tokens), so that "never fired"
// stays distinguishable from "fired once"; the axis reaches down to them only when there are some.
FreqRange freq_range(const CalibReport& r, const std::vector<LayerStats>& stats) {
  double floor = r.tokens > 0 ? 0.5 / static_cast<double>(r.tokens) : 1e-4;
  double lowest = 1;
  bool any_zero = false;
  for (const LayerStats& s : stats) {
    for (auto it = s.sorted.rbegin(); it != s.sorted.rend(); ++it) {
      if (*it > 0) {
        floor = std::min(floor, *it / 2);
        lowest = std::min(lowest, *it);
        break;
      }
    }
    any_zero = any_zero || s.never > 0;
  }
  floor = std::clamp(floor, 1e-9, 0.1);
  if (any_zero) lowest = floor;
  return {floor, std::pow(10.0, std::min(-1.0, std::floor(std::log10(lowest) + 1e-9))), any_zero};
}

std::string percent(double share, int decimals) {
  return std::isfinite(share) ? fixed(100 * share, decimals) + "%" : "n/a";
}

std::string freq_chart(size_t layer, const LayerStats& s, FreqRange range) {
  svg::Chart c;
  c.width = 300, c.height = 200, c.font = 11;
  c.title = "layer " + std::to_string(layer) + " (n_ff " + std::to_string(s.sorted.size()) + ")";
  if (s.never > 0) c.title += ", " + percent(s.never, 1) + " never fired";
  c.x = share_axis("neuron rank, hottest first");
  c.x.max_ticks = 5;
  c.y.label = "firing frequency";
  c.y.log = true;
  c.y.lo = range.lo;
  c.y.hi = 1;
  c.y.max_ticks = 5;
  svg::Series line;
  line.color = kBlue;
  const double n = static_cast<double>(s.sorted.size());
  for (size_t i : sample_ranks(s.sorted.size())) {
    line.x.push_back((static_cast<double>(i) + 0.5) / n);
    line.y.push_back(std::max(s.sorted[i], range.floor));
  }
  c.series.push_back(std::move(line));
  if (s.never > 0) c.refs.push_back({false, range.floor, "never fired", "#999", true});
  return svg::render(c);
}

std::string coverage_chart(const std::vector<LayerStats>& stats) {
  svg::Chart c;
  c.width = 900, c.height = 440;
  c.title = "Share of all activations covered by the hottest k% of neurons";
  c.x = share_axis("k: hottest neurons, share of n_ff");
  c.x.max_ticks = 11;
  c.y = share_axis("share of activations covered");
  const std::vector<std::string> colors = svg::ramp_colors(stats.size());
  for (size_t l = 0; l < stats.size(); ++l) {
    const LayerStats& s = stats[l];
    if (s.sorted.empty() || !(s.cum.back() > 0)) continue;  // nothing fired: no share to draw
    svg::Series line;
    line.label = "layer " + std::to_string(l);
    line.color = colors[l];
    line.width = 1.2;
    line.x.push_back(0), line.y.push_back(0);
    const double n = static_cast<double>(s.sorted.size());
    for (size_t i : sample_ranks(s.sorted.size())) {
      line.x.push_back(static_cast<double>(i + 1) / n);
      line.y.push_back(s.cum[i + 1] / s.cum.back());
    }
    c.series.push_back(std::move(line));
  }
  svg::Series uniform;
  uniform.label = "uniform (no locality)", uniform.color = "#999", uniform.dashed = true;
  uniform.x = {0, 1}, uniform.y = {0, 1};
  c.series.push_back(std::move(uniform));
  c.refs.push_back({true, kHotShare, "k = 20%", kRed, true});
  add_layer_legend(c, colors);
  return chart_box(c);
}

std::string quality_chart(const CalibReport& r) {
  svg::Chart c;
  c.width = per_layer_width(r.layers.size()), c.height = 340;
  c.title = "Predictor quality on held-out tokens";
  c.x = layer_axis(r.layers.size());
  c.y.label = "recall / precision";
  c.series.push_back(
      per_layer("recall", kBlue, svg::Style::LineDots, r.layers, &CalibLayerReport::recall));
  c.series.push_back(per_layer("precision", kOrange, svg::Style::LineDots, r.layers,
                               &CalibLayerReport::precision));
  if (std::isfinite(r.target))
    c.refs.push_back(
        {false, r.target, "target recall " + svg::general(r.target, 4), kRed, true, true});
  return chart_box(c);
}

std::string sparsity_chart(const CalibReport& r, bool predicted) {
  svg::Chart c;
  c.width = per_layer_width(r.layers.size()), c.height = 340;
  c.title = "Activation sparsity per layer";
  c.x = layer_axis(r.layers.size());
  c.y = share_axis("share of (token, neuron) pairs inactive");
  c.series.push_back(per_layer("true sparsity", kBlue, svg::Style::Bars, r.layers,
                               &CalibLayerReport::true_sparsity));
  if (predicted) {
    c.series.push_back(per_layer("predicted sparsity", kOrange, svg::Style::Bars, r.layers,
                                 &CalibLayerReport::predicted_sparsity));
  }
  if (r.kind == "thresholds" && std::isfinite(r.target)) {
    c.refs.push_back(
        {false, r.target, "target sparsity " + percent(r.target, 1), kRed, true, true});
  }
  return chart_box(c);
}

std::string loss_chart(const CalibReport& r) {
  svg::Chart c;
  c.width = 900, c.height = 340;
  c.title = "Predictor training loss";
  c.x.label = "epoch";
  c.x.lo = 1;
  c.x.integer_ticks = true;
  c.y.label = "loss";
  c.y.hi = 0;
  const std::vector<std::string> colors = svg::ramp_colors(r.layers.size());
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const std::vector<float>& loss = r.layers[l].loss;
    if (loss.empty()) continue;
    svg::Series s;
    s.label = "layer " + std::to_string(l);
    s.color = colors[l];
    s.style = loss.size() == 1 ? svg::Style::Dots : svg::Style::Line;
    for (size_t e = 0; e < loss.size(); ++e) {
      s.x.push_back(static_cast<double>(e + 1));
      s.y.push_back(loss[e]);
      if (std::isfinite(loss[e])) c.y.hi = std::max(c.y.hi, 1.05 * loss[e]);
    }
    c.x.hi = std::max(c.x.hi, static_cast<double>(loss.size()));
    c.series.push_back(std::move(s));
  }
  if (!(c.y.hi > 0)) c.y.hi = 1;
  if (!(c.x.hi > c.x.lo)) c.x.hi = c.x.lo + 1;
  add_layer_legend(c, colors);
  return chart_box(c);
}

}  // namespace hearth::sparse::calib
