#include "sparse/calib_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "sparse/calib_report_charts.h"
#include "sparse/svg_plot.h"

namespace hearth::sparse {

namespace {

using calib::LayerStats;
using calib::percent;
using svg::fixed;

constexpr double kNaN = CalibLayerReport::kNaN;

LayerStats layer_stats(const CalibLayerReport& l) {
  LayerStats s;
  for (float f : l.freq) s.sorted.push_back(std::isfinite(f) ? std::clamp<double>(f, 0, 1) : 0);
  std::sort(s.sorted.begin(), s.sorted.end(), std::greater<>());
  s.cum.assign(1, 0);
  for (double f : s.sorted) s.cum.push_back(s.cum.back() + f);
  const size_t n = s.sorted.size();
  if (n == 0) return s;
  s.never = static_cast<double>(std::count(s.sorted.begin(), s.sorted.end(), 0.0)) /
            static_cast<double>(n);
  // Interpolated between neurons, so the table agrees with the drawn (piecewise linear) curve.
  const double pos = calib::kHotShare * static_cast<double>(n);
  const size_t m = static_cast<size_t>(pos);
  const double partial = m < n ? (pos - static_cast<double>(m)) * s.sorted[m] : 0;
  if (s.cum.back() > 0) s.hot = (s.cum[m] + partial) / s.cum.back();
  return s;
}

bool has_predictor(const CalibLayerReport& l) {
  return l.predictor_rank > 0 || std::isfinite(l.recall);
}

// A table cell: numbers right-aligned, missing values as a dash.
std::string cell(double v, int decimals, bool low = false) {
  if (!std::isfinite(v)) return "<td class=\"na\">&mdash;</td>";
  return std::string(low ? "<td class=\"low\">" : "<td>") + fixed(v, decimals) + "</td>";
}

// Thresholds are scores or activation magnitudes of any size: fixed decimals while they read well.
std::string threshold_cell(double v) {
  if (std::isfinite(v) && v != 0 && (std::abs(v) < 1e-3 || std::abs(v) >= 1e4)) {
    return "<td>" + svg::general(v, 4) + "</td>";
  }
  return cell(v, 4);
}

std::string summary_table(const CalibReport& r, const std::vector<LayerStats>& stats) {
  std::string out =
      "<table>\n<thead><tr><th>layer</th><th>n_ff</th><th>never fired (%)</th><th>hottest 20% "
      "coverage</th><th>predictor rank</th><th>threshold</th><th>recall</th><th>precision</th>"
      "<th>predicted sparsity</th><th>true sparsity</th></tr></thead>\n<tbody>\n";
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const CalibLayerReport& layer = r.layers[l];
    const bool low = r.kind == "predictors" && layer.recall < r.target;  // false for NaN
    out += "<tr><td>" + std::to_string(l) + "</td><td>" + std::to_string(layer.freq.size()) +
           "</td>" + cell(100 * stats[l].never, 1) + cell(stats[l].hot, 3) +
           (layer.predictor_rank > 0 ? "<td>" + std::to_string(layer.predictor_rank) + "</td>"
                                     : "<td class=\"na\">none</td>") +
           threshold_cell(layer.threshold) + cell(layer.recall, 4, low) + cell(layer.precision, 3) +
           cell(layer.predicted_sparsity, 3) + cell(layer.true_sparsity, 3) + "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

// Model-wide thresholds: the share of each projection input's elements allocated per layer.
std::string input_table(const CalibReport& r) {
  std::string out =
      "<table>\n<thead><tr><th>layer</th><th>q/k/v input</th><th>wo input</th><th>gate/up "
      "input</th><th>down input</th><th>weights skipped (held-out)</th></tr></thead>\n<tbody>\n";
  for (size_t l = 0; l < r.layers.size(); ++l) {
    out += "<tr><td>" + std::to_string(l) + "</td>";
    for (const double share : r.layers[l].input_share) out += cell(share, 3);
    out += cell(r.layers[l].true_sparsity, 3) + "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

// The mean of the finite values of one field over all layers (NaN when none is finite).
double mean_of(const std::vector<CalibLayerReport>& layers,
               const std::function<double(size_t)>& field) {
  double sum = 0;
  int n = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    if (std::isfinite(field(l))) sum += field(l), ++n;
  }
  return n ? sum / n : kNaN;
}

std::string key_figures(const CalibReport& r, const std::vector<LayerStats>& stats,
                        bool any_predictor) {
  const auto& L = r.layers;
  std::string out = "<dl class=\"figures\">";
  auto add = [&out](const std::string& name, const std::string& value) {
    out += "<div><dt>" + svg::escape(name) + "</dt><dd>" + svg::escape(value) + "</dd></div>";
  };
  add("calibration", r.kind.empty() ? "unknown" : r.kind);
  add("tokens profiled", std::to_string(r.tokens));
  add("layers", std::to_string(L.size()));
  if (r.kind == "predictors") {
    add("target recall", std::isfinite(r.target) ? svg::general(r.target, 4) : "n/a");
  } else {
    add("target sparsity", percent(r.target, 1));
  }
  add("mean true sparsity", percent(mean_of(L, [&](size_t l) { return L[l].true_sparsity; }), 1));
  if (any_predictor) {
    add("mean predicted sparsity",
        percent(mean_of(L, [&](size_t l) { return L[l].predicted_sparsity; }), 1));
    add("mean recall", fixed(mean_of(L, [&](size_t l) { return L[l].recall; }), 4));
    size_t worst = 0;
    for (size_t l = 0; l < L.size(); ++l) {
      if (L[l].recall < L[worst].recall || !std::isfinite(L[worst].recall)) worst = l;
    }
    if (std::isfinite(L[worst].recall)) {
      add("lowest recall", fixed(L[worst].recall, 4) + " (layer " + std::to_string(worst) + ")");
    }
  }
  add("mean hottest-20% coverage", percent(mean_of(L, [&](size_t l) { return stats[l].hot; }), 1));
  return out + "</dl>\n";
}

constexpr const char* kStyle = R"(<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:16px 28px 40px}
h1{font-size:1.6em;margin:0.4em 0 0.2em;word-break:break-all}
h2{font-size:1.2em;margin:1.6em 0 0.4em;border-bottom:1px solid #ddd;padding-bottom:4px}
p.note{color:#555;max-width:60em;margin:0.3em 0 0.8em}
nav a{margin-right:1.2em;color:#1f5fa0}
.figures{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.figures div{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 12px;min-width:9em}
.figures dt{font-size:0.8em;color:#666}.figures dd{margin:0;font-size:1.15em;font-weight:600}
.chart{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px;margin-bottom:14px}
.chart svg,.grid svg{display:block;width:100%;height:auto}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:8px}
.grid>div{background:#fff;border:1px solid #ddd;border-radius:6px;padding:2px}
table{border-collapse:collapse;background:#fff;font-size:0.9em}
th,td{border:1px solid #ddd;padding:3px 9px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0;position:sticky;top:0}tbody tr:nth-child(even){background:#f7f7f7}
td.na{color:#aaa;text-align:center}td.low{color:#c0392b;font-weight:600}
</style>
)";

}  // namespace

std::string render_calib_report(const CalibReport& r) {
  std::vector<LayerStats> stats;
  for (const CalibLayerReport& l : r.layers) stats.push_back(layer_stats(l));
  const calib::FreqRange range = calib::freq_range(r, stats);
  const bool any_predictor = std::any_of(r.layers.begin(), r.layers.end(), has_predictor);
  const bool any_predicted =
      std::any_of(r.layers.begin(), r.layers.end(),
                  [](const CalibLayerReport& l) { return std::isfinite(l.predicted_sparsity); });
  const bool any_loss = std::any_of(r.layers.begin(), r.layers.end(),
                                    [](const CalibLayerReport& l) { return !l.loss.empty(); });
  const std::string model = svg::escape(r.model);

  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Hearth "
      "calibration: " +
      model + "</title>\n" + kStyle + "</head>\n<body>\n<main>\n";
  out += "<h1>Calibration report: " + model + "</h1>\n";
  out +=
      "<nav><a href=\"#coverage\">coverage</a><a href=\"#predictors\">predictors</a><a "
      "href=\"#sparsity\">sparsity</a><a href=\"#frequency\">frequency per layer</a><a "
      "href=\"#table\">table</a></nav>\n";
  out += key_figures(r, stats, any_predictor);

  out +=
      "<h2 id=\"coverage\">Activation locality</h2>\n<p class=\"note\">Neurons sorted by firing "
      "frequency, hottest first; a curve far above the grey diagonal means a few hot neurons do "
      "most of the work, and keeping them on the GPU pays off.</p>\n";
  out += calib::coverage_chart(stats);

  out += "<h2 id=\"predictors\">Predictors</h2>\n";
  if (any_predictor) {
    out +=
        "<p class=\"note\">Recall: share of the neurons that fired which the predictor selected; "
        "precision: share of the selected neurons that fired.</p>\n";
    out += calib::quality_chart(r);
  } else {
    out +=
        "<p class=\"note\">No layer has a predictor (magnitude thresholds select the active "
        "neurons), so there is no recall or precision to show.</p>\n";
  }
  if (any_loss) out += calib::loss_chart(r);

  out += "<h2 id=\"sparsity\">Sparsity</h2>\n";
  out += calib::sparsity_chart(r, any_predicted);

  out += "<h2 id=\"frequency\">Firing frequency per layer</h2>\n<p class=\"note\">Share of the " +
         std::to_string(r.tokens) +
         " profiled tokens for which each neuron fired, on a log scale. ";
  out += range.any_zero ? "Neurons that never fired (frequency 0) are drawn at " +
                              svg::general(range.floor, 2) + ", on the dotted line.</p>\n"
                        : "Every neuron fired at least once.</p>\n";
  out += "<div class=\"grid\">\n";
  for (size_t l = 0; l < stats.size(); ++l)
    out += "<div>" + calib::freq_chart(l, stats[l], range) + "</div>\n";
  out += "</div>\n";

  out +=
      "<h2 id=\"table\">Summary per layer</h2>\n<p class=\"note\">Coverage, recall, precision and "
      "sparsity as shares (0-1)";
  out += any_predictor && r.kind == "predictors" ? "; recall below the target in red.</p>\n"
                                                 : ".</p>\n";
  out += summary_table(r, stats);
  if (!r.layers.empty() && !r.layers.front().input_share.empty()) {
    out +=
        "<h2 id=\"inputs\">Input sparsity per layer</h2>\n<p class=\"note\">The share of each "
        "projection input's elements skipped, as the search allocated it on the calibration "
        "tokens, and the share of the layer's projection weights skipped on held-out tokens.</p>\n";
    out += input_table(r);
  }
  return out + "</main>\n</body>\n</html>\n";
}

void write_calib_report(const CalibReport& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    fail("cannot create report directory ", dir, ": ", ec ? ec.message() : "not a directory");
  }
  const std::string path = (fs::path(dir) / "index.html").string();
  const std::string page = render_calib_report(r);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(page.data(), static_cast<std::streamsize>(page.size()));
  out.close();
  if (!out) fail("cannot write ", path);
}

}  // namespace hearth::sparse
