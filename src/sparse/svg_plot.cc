#include "sparse/svg_plot.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

namespace hearth::sparse::svg {

namespace {

std::string to_chars_or_dash(double v, std::chars_format format, int precision) {
  if (!std::isfinite(v)) return "-";
  if (v == 0) v = 0;  // no "-0.000"
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, format, precision);
  std::string s(buf, r.ptr);
  // Rounding can still give "-0.0" for tiny negatives.
  if (s.find_first_not_of("-0.") == std::string::npos && s[0] == '-') s.erase(0, 1);
  return s;
}

// Pixel coordinates keep one decimal: finer than any screen, and the file stays small.
std::string px(double v) { return fixed(v, 1); }

// Where data values land on the page, for one axis.
class Scale {
 public:
  Scale(const Axis& a, double from, double to) : a_(a), from_(from), to_(to) {
    lo_ = a.log ? std::log10(a.lo) : a.lo;
    hi_ = a.log ? std::log10(a.hi) : a.hi;
    if (!(hi_ > lo_)) hi_ = lo_ + 1;  // degenerate range: draw everything at the low edge
  }
  // Values outside the axis are clamped to its edge: charts here never need a clip path.
  double operator()(double v) const {
    double t = a_.log ? (v > 0 ? std::log10(v) : lo_) : v;
    t = std::clamp((t - lo_) / (hi_ - lo_), 0.0, 1.0);
    return from_ + t * (to_ - from_);
  }

 private:
  const Axis& a_;
  double from_, to_, lo_, hi_;
};

double nice_step(double span, int max_ticks) {
  const double raw = span / std::max(1, max_ticks - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  }
  return 10 * mag;
}

std::vector<double> choose_ticks(const Axis& a) {
  if (!a.ticks.empty()) return a.ticks;
  std::vector<double> ticks;
  if (a.log) {
    const int k0 = static_cast<int>(std::ceil(std::log10(a.lo) - 1e-9));
    const int k1 = static_cast<int>(std::floor(std::log10(a.hi) + 1e-9));
    const int every = std::max(1, (k1 - k0 + a.max_ticks) / a.max_ticks);  // ceil(decades / max)
    for (int k = k1; k >= k0; k -= every) ticks.insert(ticks.begin(), std::pow(10.0, k));
    if (k1 - k0 >= 2) return ticks;
    // Under two decades, powers of ten alone leave the axis nearly unlabelled.
    ticks.clear();
    for (int k = k0 - 1; k <= k1; ++k) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, k);
        if (v >= a.lo * (1 - 1e-9) && v <= a.hi * (1 + 1e-9)) ticks.push_back(v);
      }
    }
    return ticks;
  }
  double step = nice_step(a.hi - a.lo, a.max_ticks);
  if (a.integer_ticks) step = std::max(1.0, std::round(step));
  for (double v = std::ceil(a.lo / step - 1e-9) * step; v <= a.hi + step * 1e-9; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

std::string tick_label(const Axis& a, double v, double step) {
  const double s = v * a.tick_scale;
  if (a.log) {
    const int k = static_cast<int>(std::floor(std::log10(s) + 1e-9));
    const double mantissa = s / std::pow(10.0, k);
    return (k >= -3 ? general(s, 3) : general(mantissa, 1) + "e" + std::to_string(k)) +
           a.tick_suffix;
  }
  const double scaled_step = step * a.tick_scale;
  const int decimals =
      scaled_step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(scaled_step) - 1e-9));
  return fixed(s, std::min(decimals, 6)) + a.tick_suffix;
}

// Rough text width: SVG has no text metrics without a renderer, and the legend only needs to wrap.
double text_width(const std::string& s, double font) {
  return 0.6 * font * static_cast<double>(s.size());
}

void text(std::string& out, double x, double y, const std::string& s, const char* attrs) {
  out += "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" " + attrs + ">" + escape(s) + "</text>";
}

void line(std::string& out, double x1, double y1, double x2, double y2, const std::string& attrs) {
  out += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) +
         "\" " + attrs + "/>";
}

std::string tip(const Series& s, size_t i) {
  return i < s.tips.size() ? "<title>" + escape(s.tips[i]) + "</title>" : "";
}

void draw_series(std::string& out, const Series& s, const Scale& sx, const Scale& sy, double base_y,
                 int bar_index, int n_bars) {
  const size_t n = std::min(s.x.size(), s.y.size());
  const std::string dash = s.dashed ? " stroke-dasharray=\"5 4\"" : "";
  if (s.style == Style::Line || s.style == Style::LineDots) {
    std::string d;
    bool pen_down = false;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y[i])) {
        pen_down = false;
        continue;
      }
      d += pen_down ? 'L' : 'M';
      d += px(sx(s.x[i]));
      d += ' ';
      d += px(sy(s.y[i]));
      pen_down = true;
    }
    out += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"" +
           fixed(s.width, 1) + "\" stroke-linejoin=\"round\"" + dash + "/>";
  }
  if (s.style == Style::Dots || s.style == Style::LineDots) {
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y[i])) continue;
      out += "<circle cx=\"" + px(sx(s.x[i])) + "\" cy=\"" + px(sy(s.y[i])) + "\" r=\"" +
             fixed(s.width + 1.2, 1) + "\" fill=\"" + s.color + "\">" + tip(s, i) + "</circle>";
    }
  }
  if (s.style == Style::Bars) {
    const double w = s.bar_slot / n_bars;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const double left = s.x[i] - s.bar_slot / 2 + w * bar_index;
      const double x0 = sx(left), x1 = sx(left + w), y = sy(s.y[i]);
      out += "<rect x=\"" + px(x0) + "\" y=\"" + px(std::min(y, base_y)) + "\" width=\"" +
             px(std::max(0.5, x1 - x0)) + "\" height=\"" + px(std::abs(base_y - y)) + "\" fill=\"" +
             s.color + "\">" + tip(s, i) + "</rect>";
    }
  }
}

struct LegendItem {
  std::string label, color;
  bool dashed = false, bar = false;
  double x = 0, y = 0;
};

// Labelled series, then reference lines whose label belongs in the legend, in rows that wrap.
std::vector<LegendItem> legend_items(const Chart& c) {
  std::vector<LegendItem> items;
  if (c.legend) {
    for (const Series& s : c.series) {
      if (!s.label.empty()) items.push_back({s.label, s.color, s.dashed, s.style == Style::Bars});
    }
  }
  for (const RefLine& r : c.refs) {
    if (r.in_legend && !r.label.empty()) items.push_back({r.label, r.color, r.dashed, false});
  }
  return items;
}

}  // namespace

std::string fixed(double v, int decimals) {
  return to_chars_or_dash(v, std::chars_format::fixed, decimals);
}

std::string general(double v, int digits) {
  return to_chars_or_dash(v, std::chars_format::general, digits);
}

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::string> ramp_colors(size_t n) {
  // Viridis stops without its pale yellow end, which vanishes on a white page.
  static constexpr uint8_t kStops[][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {53, 183, 121}, {144, 200, 54}};
  constexpr int kLast = 4;
  std::vector<std::string> colors;
  for (size_t i = 0; i < n; ++i) {
    const double t = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) * kLast : 0;
    const int k = std::min(static_cast<int>(t), kLast - 1);
    const double f = t - k;
    char buf[8];
    std::string hex = "#";
    for (int c = 0; c < 3; ++c) {
      const int v =
          static_cast<int>(std::lround(kStops[k][c] + f * (kStops[k + 1][c] - kStops[k][c])));
      std::to_chars(buf, buf + sizeof buf, 256 + v, 16);  // "1xx": keeps the leading zero
      hex.append(buf + 1, 2);
    }
    colors.push_back(hex);
  }
  return colors;
}

namespace {

// Where things go on the page: the plot frame (left and top edges, width, height), the legend
// entries, and the colour ramp's row (ramp_y < 0: none).
struct Frame {
  double left = 0, top = 0, pw = 0, ph = 0, ramp_y = -1;
  std::vector<LegendItem> items;
};

// Legend entries flow in rows above the plot; they are laid out first to know how tall they are.
Frame lay_out(const Chart& c) {
  const double f = c.font, w = c.width, h = c.height;
  const double right = f * 1.8, bottom = f * 3.2;
  Frame fr;
  fr.left = f * 5;
  fr.top = c.title.empty() ? f : f * 2.2;
  fr.items = legend_items(c);
  double lx = fr.left, rows = 0;
  for (LegendItem& it : fr.items) {
    const double iw = f * 2.2 + text_width(it.label, f * 0.9) + f;
    if (lx + iw > w - right && lx > fr.left) lx = fr.left, rows += 1;
    it.x = lx, it.y = fr.top + rows * f * 1.4 + f * 0.5;
    lx += iw;
  }
  if (!fr.items.empty()) fr.top += (rows + 1) * f * 1.4;
  if (!c.ramp.colors.empty()) fr.ramp_y = fr.top + f * 0.5, fr.top += f * 1.4;
  fr.top += f * 0.4;
  fr.pw = w - fr.left - right;
  fr.ph = h - fr.top - bottom;
  return fr;
}

void draw_legend(std::string& out, const Chart& c, const Frame& fr) {
  const double f = c.font;
  for (const LegendItem& it : fr.items) {
    const std::string dash = it.dashed ? " stroke-dasharray=\"4 3\"" : "";
    if (it.bar) {
      out += "<rect x=\"" + px(it.x) + "\" y=\"" + px(it.y - f * 0.4) + "\" width=\"" +
             px(f * 1.6) + "\" height=\"" + px(f * 0.8) + "\" fill=\"" + it.color + "\"/>";
    } else {
      line(out, it.x, it.y, it.x + f * 1.6, it.y,
           "stroke=\"" + it.color + "\" stroke-width=\"2.5\"" + dash);
    }
    text(out, it.x + f * 2.1, it.y + f * 0.32, it.label, "font-size=\"0.9em\"");
  }
  if (fr.ramp_y < 0) return;
  const double y = fr.ramp_y;
  text(out, fr.left, y + f * 0.32, c.ramp.lo_label, "font-size=\"0.9em\"");
  const double rx = fr.left + text_width(c.ramp.lo_label, f * 0.9) + f * 0.5, rw = f * 10;
  const double cw = rw / static_cast<double>(c.ramp.colors.size());
  for (size_t i = 0; i < c.ramp.colors.size(); ++i) {
    out += "<rect x=\"" + px(rx + cw * i) + "\" y=\"" + px(y - f * 0.4) + "\" width=\"" +
           px(cw + 0.3) + "\" height=\"" + px(f * 0.8) + "\" fill=\"" + c.ramp.colors[i] + "\"/>";
  }
  text(out, rx + rw + f * 0.5, y + f * 0.32, c.ramp.hi_label, "font-size=\"0.9em\"");
}

// Grid, ticks, frame and axis labels.
void draw_axes(std::string& out, const Chart& c, const Frame& fr, const Scale& sx,
               const Scale& sy) {
  const double f = c.font;
  const double left = fr.left, top = fr.top, pw = fr.pw, ph = fr.ph;
  const std::vector<double> xt = choose_ticks(c.x), yt = choose_ticks(c.y);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : yt) {
    const double y = sy(v);
    line(out, left, y, left + pw, y, "stroke=\"#e4e4e4\"");
    text(out, left - f * 0.4, y + f * 0.35, tick_label(c.y, v, ystep), "text-anchor=\"end\"");
  }
  for (double v : xt) {
    const double x = sx(v);
    line(out, x, top + ph, x, top + ph + f * 0.35, "stroke=\"#888\"");
    text(out, x, top + ph + f * 1.35, tick_label(c.x, v, xstep), "text-anchor=\"middle\"");
  }
  out += "<rect x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(pw) + "\" height=\"" +
         px(ph) + "\" fill=\"none\" stroke=\"#bbb\"/>";
  text(out, left + pw / 2, c.height - f * 0.5, c.x.label, "text-anchor=\"middle\"");
  const std::string ly = px(top + ph / 2);
  out += "<text x=\"" + px(f * 1.1) + "\" y=\"" + ly +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 " + px(f * 1.1) + " " + ly + ")\">" +
         escape(c.y.label) + "</text>";
}

void draw_refs(std::string& out, const Chart& c, const Frame& fr, const Scale& sx,
               const Scale& sy) {
  const double f = c.font;
  for (const RefLine& r : c.refs) {
    const std::string attrs = "stroke=\"" + r.color + "\" stroke-width=\"1.3\"" +
                              (r.dashed ? " stroke-dasharray=\"6 4\"" : "");
    const std::string label = r.in_legend ? "" : r.label;
    if (r.vertical) {
      const double x = sx(r.at);
      line(out, x, fr.top, x, fr.top + fr.ph, attrs);
      text(out, x + f * 0.3, fr.top + f * 1.0, label,
           ("font-size=\"0.9em\" fill=\"" + r.color + "\"").c_str());
    } else {
      // Above the line, unless that would run into the frame.
      const double y = sy(r.at), ty = y - fr.top < f * 1.2 ? y + f * 1.0 : y - f * 0.3;
      line(out, fr.left, y, fr.left + fr.pw, y, attrs);
      text(out, fr.left + fr.pw - f * 0.3, ty, label,
           ("text-anchor=\"end\" font-size=\"0.9em\" fill=\"" + r.color + "\"").c_str());
    }
  }
}

}  // namespace

std::string render(const Chart& c) {
  const Frame fr = lay_out(c);
  const Scale sx(c.x, fr.left, fr.left + fr.pw), sy(c.y, fr.top + fr.ph, fr.top);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + px(c.width) +
                    " " + px(c.height) + "\" font-family=\"sans-serif\" font-size=\"" +
                    fixed(c.font, 1) + "\" role=\"img\">";
  if (!c.title.empty()) {
    text(out, c.width / 2, c.font * 1.4, c.title, "text-anchor=\"middle\" font-weight=\"bold\"");
  }
  draw_legend(out, c, fr);
  draw_axes(out, c, fr, sx, sy);
  const int n_bars = static_cast<int>(std::count_if(
      c.series.begin(), c.series.end(), [](const Series& s) { return s.style == Style::Bars; }));
  const double base_y = sy(c.y.log ? c.y.lo : std::max(c.y.lo, 0.0));
  int bar_index = 0;
  for (const Series& s : c.series) {
    draw_series(out, s, sx, sy, base_y, bar_index, n_bars);
    if (s.style == Style::Bars) ++bar_index;
  }
  draw_refs(out, c, fr, sx, sy);
  out += "</svg>";
  return out;
}

}  // namespace hearth::sparse::svg
