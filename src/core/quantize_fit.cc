// Scale searches for the block quantizers (see quantize_fit.h for what each one fits).
#include "core/quantize_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant_blocks.h"

namespace hearth::qfit {
namespace {

constexpr int kMaxGroup = 32;  // the largest group any caller fits (a 32-weight sub-block)

// Sums for the least-squares scale of symmetric codes at inverse scale `iscale`.
struct Sums {
  float lx = 0.0f, l2 = 0.0f;
};
Sums symmetric_sums(int n, int nmax, const float* x, const float* w, float iscale, uint8_t* L) {
  Sums s;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    if (L) L[i] = static_cast<uint8_t>(l + nmax);
    const float wi = w ? w[i] : x[i] * x[i];
    s.lx += wi * x[i] * static_cast<float>(l);
    s.l2 += wi * static_cast<float>(l * l);
  }
  return s;
}

}  // namespace

float signed_absmax(int n, const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

float fit_symmetric(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  const float max = signed_absmax(n, x);
  if (std::fabs(max) < kGroupEps) {
    std::memset(L, nmax, static_cast<size_t>(n));
    return 0.0f;
  }
  Sums s = symmetric_sums(n, nmax, x, w, -static_cast<float>(nmax) / max, L);
  float scale = s.l2 > 0.0f ? s.lx / s.l2 : 0.0f;
  float best = scale * s.lx;  // the error at the least-squares scale is sum w x^2 - best
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    s = symmetric_sums(n, nmax, x, w, iscale, nullptr);
    if (s.l2 > 0.0f && s.lx * s.lx > best * s.l2) {
      symmetric_sums(n, nmax, x, w, iscale, L);
      scale = s.lx / s.l2;
      best = scale * s.lx;
    }
  }
  return scale;
}

float fit_symmetric_refine(int n, int nmax, const float* x, uint8_t* L) {
  const float max = signed_absmax(n, x);
  if (std::fabs(max) < kGroupEps) {
    std::memset(L, nmax, static_cast<size_t>(n));
    return 0.0f;
  }
  int q[kMaxGroup];
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float wi = x[i] * x[i];
    sumlx += wi * x[i] * static_cast<float>(q[i]);
    suml2 += wi * static_cast<float>(q[i] * q[i]);
  }
  // Move one code at a time to where the others' least-squares scale puts it, keeping a move
  // only when it raises sumlx^2 / suml2 (lowers the error).
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float wi = x[i] * x[i];
      float slx = sumlx - wi * x[i] * static_cast<float>(q[i]);
      if (slx <= 0.0f) continue;
      float sl2 = suml2 - wi * static_cast<float>(q[i] * q[i]);
      const int nl = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (nl == q[i]) continue;
      slx += wi * x[i] * static_cast<float>(nl);
      sl2 += wi * static_cast<float>(nl * nl);
      if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
        q[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(q[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void round_symmetric(int n, const float* x, float d, int nmax, uint8_t* L) {
  if (d == 0.0f) return;
  const float id = 1.0f / d;
  for (int j = 0; j < n; ++j) {
    L[j] = static_cast<uint8_t>(std::clamp(nearest_int(x[j] * id), -nmax, nmax - 1) + nmax);
  }
}

ScaleMinFit fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float rmin,
                          float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0], sum_w = 0.0f, sum_x = 0.0f;
  for (int i = 0; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (!(max - min > kGroupEps)) {
    // Constant (or empty-range) group: code 0 and the offset alone reproduce it.
    std::memset(L, 0, static_cast<size_t>(n));
    return {0.0f, -min};
  }
  const auto error = [&](float scale, float offset, const uint8_t* q) {
    float e = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float d = scale * static_cast<float>(q[i]) + offset - x[i];
      e += w[i] * (use_mad ? std::fabs(d) : d * d);
    }
    return e;
  };
  const auto round_codes = [&](float iscale, float offset, uint8_t* q) {
    for (int i = 0; i < n; ++i) {
      q[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - offset)), 0, nmax));
    }
  };
  float scale = (max - min) / static_cast<float>(nmax);
  round_codes(static_cast<float>(nmax) / (max - min), min, L);
  float best = error(scale, min, L);
  uint8_t trial[kMaxGroup];
  for (int is = 0; is <= nstep; ++is) {
    const float iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    round_codes(iscale, min, trial);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(trial[i]);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    // Least squares over (scale, offset) for these codes: the 2x2 normal equations.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      // The format only subtracts an offset: refit the scale alone with the offset at 0.
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    const float e = error(this_scale, this_min, trial);
    if (e < best) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best = e;
      scale = this_scale;
      min = this_min;
    }
  }
  return {scale, -min};
}

float fit_positive(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (!(max > 0.0f)) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const auto code = [&](float iscale, int i) {
    return std::clamp(nearest_int(iscale * x[i]), 0, nmax);
  };
  const auto mse = [&](float iscale) {
    float e = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float d = x[i] - static_cast<float>(code(iscale, i)) / iscale;
      e += w[i] * d * d;
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / max;
  float best = mse(iscale);
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float trial = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float e = mse(trial);
    if (e < best) {
      best = e;
      iscale = trial;
    }
  }
  int q[kMaxGroup];
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = code(iscale, i);
    sumlx += w[i] * x[i] * static_cast<float>(q[i]);
    suml2 += w[i] * static_cast<float>(q[i] * q[i]);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * static_cast<float>(q[i]);
      float sl2 = suml2 - w[i] * static_cast<float>(q[i] * q[i]);
      if (!(slx > 0.0f && sl2 > 0.0f)) continue;
      const int nl = std::clamp(nearest_int(x[i] * sl2 / slx), 0, nmax);
      if (nl == q[i]) continue;
      slx += w[i] * x[i] * static_cast<float>(nl);
      sl2 += w[i] * static_cast<float>(nl * nl);
      if (slx * slx * suml2 > sumlx * sumlx * sl2) {
        q[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(q[i]);
  // Zero weights everywhere leave no least-squares answer: the trial scale is as good as any.
  return suml2 > 0.0f ? sumlx / suml2 : 1.0f / iscale;
}

void group_weights(int n, const float* x, const float* qw, float sigma2, float* w) {
  for (int i = 0; i < n; ++i) w[i] = (qw ? qw[i] : 1.0f) * std::sqrt(sigma2 + x[i] * x[i]);
}

float mean_square(int n, const float* x) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  return n > 0 ? s / static_cast<float>(n) : 0.0f;
}

namespace {

// For each integer k in [kIq4nlValues[0], kIq4nlValues[15]): the last code whose value is <= k.
// The values are integers, so that code is also the last one <= v for every v with floor(v) = k:
// one load instead of a binary search, whose branches the quantizers' scale searches (thousands
// of calls per block) mispredict about every other time.
constexpr int kIq4Lowest = kIq4nlValues[0];
constexpr int kIq4Span = kIq4nlValues[15] - kIq4Lowest;
struct Iq4Floor {
  uint8_t code[kIq4Span];
};
constexpr Iq4Floor make_iq4_floor() {
  Iq4Floor t{};
  int code = 0;
  for (int k = 0; k < kIq4Span; ++k) {
    while (kIq4nlValues[code + 1] <= k + kIq4Lowest) ++code;
    t.code[k] = static_cast<uint8_t>(code);
  }
  return t;
}
constexpr Iq4Floor kIq4Floor = make_iq4_floor();

}  // namespace

int iq4_index(float v) {
  if (v <= kIq4nlValues[0]) return 0;
  if (!(v < kIq4nlValues[15])) return 15;  // NaN too
  // floor(v) from the truncation (std::floor is a library call on the baseline ISA).
  int k = static_cast<int>(v);
  k -= static_cast<float>(k) > v ? 1 : 0;
  const int lo = kIq4Floor.code[k - kIq4Lowest];
  const int hi = lo + 1;  // kIq4nlValues[lo] <= v < kIq4nlValues[hi]
  return v - kIq4nlValues[lo] < kIq4nlValues[hi] - v ? lo : hi;
}

float fit_iq4(int n, const float* x, const float* w, uint8_t* L) {
  const float max = signed_absmax(n, x);
  if (std::fabs(max) < kGroupEps) {
    std::memset(L, iq4_index(0.0f), static_cast<size_t>(n));
    return 0.0f;
  }
  // The candidate inverse scales: first the extreme value at +127, clamped to the table's
  // positive end; then trials with the extreme value near either end of the table, -127 (the
  // longer side) or 113.
  constexpr int kSteps = 7;
  constexpr int kTrials = 1 + 2 * (2 * kSteps + 1);
  float ids[kTrials];
  ids[0] = -static_cast<float>(kIq4nlValues[0]) / max;
  int k = 1;
  const float ends[2] = {static_cast<float>(kIq4nlValues[0]), static_cast<float>(kIq4nlValues[15])};
  for (const float end : ends) {
    for (int t = -kSteps; t <= kSteps; ++t) ids[k++] = (static_cast<float>(t) + end) / max;
  }
  // Every candidate's sums, each added in the order of x: the candidates side by side are
  // independent chains, where one candidate at a time waits on its own adds.
  Sums s[kTrials];
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < kTrials; ++c) {
      const float v = kIq4nlValues[iq4_index(ids[c] * x[i])];
      s[c].lx += w[i] * v * x[i];
      s[c].l2 += w[i] * v * v;
    }
  }
  // The first guess, then each trial that beats the best so far.
  int chosen = 0;
  float scale = s[0].l2 > 0.0f ? s[0].lx / s[0].l2 : 1.0f / ids[0];
  float best = scale * s[0].lx;
  for (int c = 1; c < kTrials; ++c) {
    if (s[c].l2 > 0.0f && s[c].lx * s[c].lx > best * s[c].l2) {
      chosen = c;
      scale = s[c].lx / s[c].l2;
      best = scale * s[c].lx;
    }
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(iq4_index(ids[chosen] * x[i]));
  return scale;
}

}  // namespace hearth::qfit
