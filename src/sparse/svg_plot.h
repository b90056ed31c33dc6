// A tiny SVG chart writer for Hearth's HTML reports: line, dot and grouped-bar series over linear
// or base-10 log axes, reference lines and a legend. Reports must open offline and compare byte
// for byte between runs, so the output is plain inline SVG (no script, no external resources), and
// every number is printed with std::to_chars, whatever the process locale.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth::sparse::svg {

// `v` with exactly `decimals` digits after the point ("-" for NaN or infinity).
std::string fixed(double v, int decimals);
// `v` with `digits` significant digits, shortest form ("-" for NaN or infinity).
std::string general(double v, int digits);
// Text made safe inside HTML or SVG elements and attribute values.
std::string escape(std::string_view text);

struct Axis {
  std::string label;
  double lo = 0, hi = 1;
  bool log = false;            // base 10; lo must then be > 0
  std::vector<double> ticks;   // empty: chosen (decades on a log axis, 1-2-5 steps otherwise)
  int max_ticks = 6;           // for chosen linear ticks
  double tick_scale = 1;       // tick labels show value * tick_scale (e.g. 100 for percent)
  std::string tick_suffix;     // e.g. "%"
  bool integer_ticks = false;  // chosen linear ticks are whole numbers (layer indices)
};

enum class Style { Line, Dots, LineDots, Bars };

struct Series {
  std::string label;  // empty: not listed in the legend
  std::string color = "#1f77b4";
  Style style = Style::Line;
  bool dashed = false;
  double width = 1.5;        // stroke width of lines
  std::vector<double> x, y;  // a NaN y leaves a gap (no bar, no dot, a break in the line)
  // Bars are grouped around each x: all Bars series of a chart share a slot of width bar_slot.
  double bar_slot = 0.8;
  std::vector<std::string> tips;  // optional hover text per point (an SVG <title>)
};

struct RefLine {
  bool vertical = false;  // false: y = at; true: x = at
  double at = 0;
  std::string label;
  std::string color = "#555";
  bool dashed = true;
  bool in_legend = false;  // label in the legend instead of beside the line (crowded charts)
};

// A colour ramp drawn as the legend instead of one entry per series (many layers).
struct RampLegend {
  std::vector<std::string> colors;  // empty: none
  std::string lo_label, hi_label;
};

struct Chart {
  int width = 640, height = 320;  // SVG user units; the page scales the SVG to its box
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  std::vector<RefLine> refs;
  bool legend = true;  // list labelled series above the plot
  RampLegend ramp;
  double font = 12;  // base font size; small multiples use less
};

// One self-contained <svg> element.
std::string render(const Chart& chart);

// `n` colours along a perceptually ordered ramp (dark blue to green), for layer depth.
std::vector<std::string> ramp_colors(size_t n);

}  // namespace hearth::sparse::svg
