// The calibration report must be one self-contained, deterministic HTML page: the charts it
// promises, no external resources, escaped text, a table row per layer, and clear I/O errors.
#include "sparse/calib_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "common/test_util.h"
#include "core/error.h"

namespace hearth::sparse {
namespace {

// n neurons firing with a power-law frequency (rank^-alpha), in a shuffled order as a profile
// would report them, with a tail that never fired.
std::vector<float> power_law(size_t n, double alpha, uint32_t seed) {
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) {
    const double v = 0.9 * std::pow(static_cast<double>(i + 1), -alpha);
    f[i] = v < 2e-4 ? 0.0f : static_cast<float>(v);
  }
  std::shuffle(f.begin(), f.end(), std::mt19937(seed));
  return f;
}

// A report of n_layers layers; `fill` sets each layer's frequencies and fields.
CalibReport synthetic_report(const std::string& kind, size_t n_layers, double target,
                             const std::function<void(size_t, CalibLayerReport&)>& fill) {
  CalibReport r;
  r.model = "tiny-" + kind + ".gguf";
  r.kind = kind;
  r.tokens = 4096;
  r.target = target;
  for (size_t l = 0; l < n_layers; ++l) fill(l, r.layers.emplace_back());
  return r;
}

CalibReport predictor_report(size_t n_layers, size_t n_ff) {
  CalibReport r =
      synthetic_report("predictors", n_layers, 0.99, [n_ff](size_t l, CalibLayerReport& layer) {
        layer.freq = power_law(n_ff, 0.8 + 0.1 * static_cast<double>(l), static_cast<uint32_t>(l));
        layer.recall = 0.97 + 0.005 * static_cast<double>(l);
        layer.precision = 0.6;
        layer.predicted_sparsity = 0.85;
        layer.true_sparsity = 0.9;
        layer.predictor_rank = 64;
        layer.threshold = 0.5;
        layer.loss = {0.9f, 0.5f, 0.3f, 0.25f};
      });
  // A layer whose profile saw nothing fire, and one without a predictor (its fields stay NaN).
  r.layers.emplace_back().freq.assign(n_ff, 0.0f);
  r.layers.back().true_sparsity = 1;
  r.layers.emplace_back().freq = power_law(n_ff, 1.0, 7);
  return r;
}

CalibReport threshold_report(size_t n_layers, size_t n_ff) {
  return synthetic_report("thresholds", n_layers, 0.4, [n_ff](size_t l, CalibLayerReport& layer) {
    layer.freq = power_law(n_ff, 0.3, static_cast<uint32_t>(l));
    layer.true_sparsity = 0.4;
    layer.threshold = 0.05 * static_cast<double>(l + 1);
  });
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size()))
    ++n;
  return n;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(CalibReport, IsACompleteHtmlDocument) {
  const std::string page = render_calib_report(predictor_report(3, 172));
  EXPECT_EQ(page.rfind("<!DOCTYPE html>\n<html", 0), 0u);
  for (const char* tag : {"<head>", "</head>", "<body>", "</body>", "<meta charset=\"utf-8\">",
                          "<title>Hearth", "<style>", "<table>", "</table>"}) {
    EXPECT_EQ(count(page, tag), 1u) << tag;
  }
  EXPECT_TRUE(page.ends_with("</html>\n"));
  EXPECT_EQ(count(page, "<svg"), count(page, "</svg>"));
}

TEST(CalibReport, DrawsOneChartPerLayerPlusTheSummaryCharts) {
  // 5 layers: frequency x5, coverage, recall/precision, training loss, sparsity.
  const std::string with_predictors = render_calib_report(predictor_report(3, 172));
  EXPECT_EQ(count(with_predictors, "<svg"), 5u + 4u);
  EXPECT_NE(with_predictors.find("Predictor quality"), std::string::npos);
  EXPECT_NE(with_predictors.find("target recall 0.99"), std::string::npos);
  EXPECT_NE(with_predictors.find("predicted sparsity"), std::string::npos);

  // Thresholds: frequency x4, coverage, sparsity; the predictor chart is replaced by a sentence.
  const std::string thresholds = render_calib_report(threshold_report(4, 300));
  EXPECT_EQ(count(thresholds, "<svg"), 4u + 2u);
  EXPECT_NE(thresholds.find("No layer has a predictor"), std::string::npos);
  EXPECT_EQ(thresholds.find("Predictor quality"), std::string::npos);
  EXPECT_EQ(thresholds.find("training loss"), std::string::npos);
  EXPECT_NE(thresholds.find("target sparsity 40.0%"), std::string::npos);
}

TEST(CalibReport, ReferencesNothingOutsideThePage) {
  for (const CalibReport& r : {predictor_report(3, 172), threshold_report(2, 64)}) {
    std::string page = lower(render_calib_report(r));
    EXPECT_EQ(page.find("<script"), std::string::npos);
    EXPECT_EQ(page.find("src="), std::string::npos);
    EXPECT_EQ(page.find("@import"), std::string::npos);
    EXPECT_EQ(page.find("url("), std::string::npos);
    const std::string ns = "xmlns=\"http://www.w3.org/2000/svg\"";
    for (size_t at; (at = page.find(ns)) != std::string::npos;) page.erase(at, ns.size());
    EXPECT_EQ(page.find("http://"), std::string::npos);
    EXPECT_EQ(page.find("https://"), std::string::npos);
  }
}

TEST(CalibReport, EscapesTheModelName) {
  CalibReport r = threshold_report(1, 32);
  r.model = "evil<b>&\"'.gguf";
  const std::string page = render_calib_report(r);
  EXPECT_EQ(page.find("<b>&"), std::string::npos);
  EXPECT_NE(page.find("evil&lt;b&gt;&amp;&quot;&#39;.gguf"), std::string::npos);
}

TEST(CalibReport, TableHasOneRowPerLayer) {
  const CalibReport r = predictor_report(3, 172);
  const std::string page = render_calib_report(r);
  EXPECT_EQ(count(page, "<tr><td>"), r.layers.size());
  EXPECT_EQ(count(page, "<tr><th>"), 1u);
  // The layer without a predictor shows dashes, not "nan".
  EXPECT_EQ(page.find("nan"), std::string::npos);
  EXPECT_EQ(page.find("inf"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"na\">none</td>"), std::string::npos);
}

TEST(CalibReport, ModelWideThresholdsGetTheirInputTable) {
  const CalibReport r = synthetic_report("input thresholds", 2, 0.4, [](size_t l, CalibLayerReport& layer) {
    layer.freq = power_law(64, 1.0, static_cast<uint32_t>(l));
    layer.true_sparsity = 0.41;
    layer.input_share = {0.25, 0.5, 0.35, 0.555};
  });
  const std::string page = render_calib_report(r);
  EXPECT_NE(page.find("Input sparsity per layer"), std::string::npos);
  EXPECT_EQ(count(page, "<tr><td>"), 2 * r.layers.size());  // the summary's rows and these
  EXPECT_NE(page.find("<td>0.555</td>"), std::string::npos);
  // Other kinds have no such table.
  EXPECT_EQ(render_calib_report(predictor_report(2, 64)).find("Input sparsity"), std::string::npos);
}

TEST(CalibReport, TableShowsHottestCoverage) {
  CalibReport r;
  r.kind = "thresholds";
  r.tokens = 100;
  // Two of ten neurons carry every activation: the hottest 20% cover all of them.
  r.layers.emplace_back().freq = {0, 1, 0, 0, 0, 0, 0, 1, 0, 0};
  r.layers.emplace_back().freq.assign(10, 0.5f);  // uniform: 20% of neurons, 20% of activations
  const std::string page = render_calib_report(r);
  EXPECT_NE(page.find("<tr><td>0</td><td>10</td><td>80.0</td><td>1.000</td>"), std::string::npos);
  EXPECT_NE(page.find("<tr><td>1</td><td>10</td><td>0.0</td><td>0.200</td>"), std::string::npos);
}

TEST(CalibReport, OutputIsDeterministic) {
  const CalibReport r = predictor_report(3, 1000);
  const std::string first = render_calib_report(r);
  EXPECT_EQ(first, render_calib_report(r));
  EXPECT_EQ(first, render_calib_report(predictor_report(3, 1000)));
}

TEST(CalibReport, StaysSmallForLargeModels) {
  // 80 layers x 14000 neurons: the curves are downsampled, so the page stays well under 1 MB.
  const std::string page = render_calib_report(predictor_report(78, 14000));
  EXPECT_EQ(count(page, "<svg"), 80u + 4u);
  EXPECT_LT(page.size(), 1000000u);
}

TEST(CalibReport, EmptyReportStillRenders) {
  const std::string page = render_calib_report(CalibReport{});
  EXPECT_TRUE(page.ends_with("</html>\n"));
  EXPECT_EQ(count(page, "<tr><td>"), 0u);
  EXPECT_EQ(page.find("nan"), std::string::npos);
}

TEST(CalibReport, WritesIndexHtmlCreatingTheDirectory) {
  const CalibReport r = threshold_report(2, 64);
  const std::string dir = test::temp_dir() + "/nested/report";
  write_calib_report(r, dir);
  EXPECT_EQ(test::read_file(dir + "/index.html"), render_calib_report(r));
  write_calib_report(r, dir);  // an existing report is replaced
  EXPECT_EQ(test::read_file(dir + "/index.html"), render_calib_report(r));
}

TEST(CalibReport, FailsClearlyForAnUnwritablePath) {
  const std::string file = test::temp_dir() + "/plain-file";
  test::write_file(file, "x");
  for (const std::string& dir : {file + "/report", file}) {
    try {
      write_calib_report(threshold_report(1, 16), dir);
      ADD_FAILURE() << "no error for " << dir;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot create report directory " + dir),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace hearth::sparse
