// Q4_0 blocks with the least (weighted) squared error, for writing model files. ggml's reference
// maps the value of largest magnitude to -8 exactly, which wastes most of the 16 levels on a block
// with one outlier. Here the scale and the codes are chosen together for the least
// sum_j w_j (x_j - d q_j)^2; the block format and the kernels are unchanged (any scale is valid).
//
// Why an exact sweep rather than a grid of scales: for a fixed scale d the best codes are x_j / d
// rounded to nearest and clamped to [-8, 7] (the error is a sum of independent terms, whatever the
// weights), so the optimum pair (d, q) has q = round(x / d). As s = 1/|d| grows from 0, those codes
// change one step at a time, code j at s = (k + 1/2) / |x_j|: at most 8 * 32 events. Sweeping them
// in order while keeping sxq = sum w |x| m and sqq = sum w m^2 (m = |q|) gives every code vector
// rounding can produce, each with its least-squares scale sxq / sqq and error
// sum w x^2 - sxq^2 / sqq. The best of those is the optimum over all real scales; the only loss
// left is rounding d to f16, handled by re-rounding the codes to the stored scale.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quantize.h"
#include "core/quantize_blocks.h"

namespace hearth {
namespace {

constexpr int kLevels = 8;  // magnitudes 0..8: -8 is the one level beyond 7

struct Event {
  float s;  // 1 / |d| at which the code of element j grows from k to k + 1 in magnitude
  int8_t j;
  int8_t k;
};

struct Codes {
  double err = INFINITY;
  float d = 0.0f;
  std::array<int8_t, kQK> q{};
};

double weighted_error(const float* x, const float* w, float d, const int8_t* q) {
  double e = 0.0;
  for (int j = 0; j < kQK; ++j) {
    const double r = static_cast<double>(x[j]) - static_cast<double>(d) * q[j];
    e += (w ? w[j] : 1.0) * r * r;
  }
  return e;
}

// The codes nearest to x / d (d already as stored, so these are what dequantization will see).
Codes round_to(const float* x, const float* w, float d) {
  Codes c;
  c.d = d;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float v = std::nearbyint(x[j] * id);
    c.q[j] = static_cast<int8_t>(v < -8.0f ? -8.0f : v > 7.0f ? 7.0f : v);
  }
  c.err = weighted_error(x, w, d, c.q.data());
  return c;
}

// The sweep for one sign of d. sign > 0: positive x take codes up to 7 and negative ones down to
// -8; sign < 0 the other way round. Returns the best codes with their scale rounded to f16.
Codes sweep(const float* x, const float* w, const std::array<Event, kLevels * kQK>& events,
            int n_events, int sign) {
  std::array<int8_t, kQK> m{};
  double sxq = 0.0, sqq = 0.0, best_gain = 0.0;
  int best = -1;
  for (int e = 0; e < n_events; ++e) {
    const Event& ev = events[static_cast<size_t>(e)];
    // Magnitude 8 exists only on the side of -8.
    const bool positive = x[ev.j] * sign > 0.0f;
    if (ev.k == kLevels - 1 && positive) continue;
    const double wj = w ? w[ev.j] : 1.0;
    const double ax = std::fabs(static_cast<double>(x[ev.j]));
    sxq += wj * ax;                      // m -> m + 1 adds |x|
    sqq += wj * (2.0 * m[ev.j] + 1.0);   // (m + 1)^2 - m^2
    ++m[ev.j];
    // Equal s: take the codes only once all of them have changed.
    if (e + 1 < n_events && events[static_cast<size_t>(e + 1)].s == ev.s) continue;
    // The error at the least-squares scale is sum w x^2 - gain: the largest gain wins.
    const double gain = sqq > 0.0 ? sxq * sxq / sqq : 0.0;
    if (gain > best_gain) {
      best_gain = gain;
      best = e;
    }
  }
  Codes c;
  if (best < 0) return c;
  // Replay up to the best event for its codes, then store the least-squares scale.
  m.fill(0);
  for (int e = 0; e <= best; ++e) {
    const Event& ev = events[static_cast<size_t>(e)];
    if (ev.k == kLevels - 1 && x[ev.j] * sign > 0.0f) continue;
    ++m[ev.j];
  }
  double num = 0.0, den = 0.0;
  for (int j = 0; j < kQK; ++j) {
    const double wj = w ? w[j] : 1.0;
    const int q = (x[j] < 0.0f ? -1 : 1) * sign * m[j];
    c.q[j] = static_cast<int8_t>(q);
    num += wj * x[j] * q;
    den += wj * q * q;
  }
  c.d = fp16_to_fp32(fp32_to_fp16(static_cast<float>(num / den)));
  c.err = weighted_error(x, w, c.d, c.q.data());
  // The f16 scale moved a little: the codes nearest to it can only be as good or better.
  const Codes r = round_to(x, w, c.d);
  return r.err < c.err ? r : c;
}

void store(const Codes& c, BlockQ4_0* y) {
  y->d = fp32_to_fp16(c.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y->qs[j] = static_cast<uint8_t>((c.q[j] + 8) | ((c.q[j + kQK / 2] + 8) << 4));
  }
}

}  // namespace

void quantize_block_q4_0_search(const float* x, const float* w, BlockQ4_0* y) {
  std::array<Event, kLevels * kQK> events;
  int n = 0;
  for (int j = 0; j < kQK; ++j) {
    const float ax = std::fabs(x[j]);
    // x_j = 0 keeps code 0 at every scale.
    if (ax == 0.0f) continue;
    for (int k = 0; k < kLevels; ++k) {
      events[static_cast<size_t>(n++)] = Event{(k + 0.5f) / ax, static_cast<int8_t>(j),
                                               static_cast<int8_t>(k)};
    }
  }
  // ggml's reference block is the fallback (all-zero blocks) and a floor: the result is never
  // worse than it under the same weights, even where rounding the scale to f16 hurts the sweep.
  BlockQ4_0 ref;
  quantize_block_q4_0(x, &ref);
  float deq[kQK];
  dequantize_row(DType::Q4_0, &ref, deq, kQK);
  double ref_err = 0.0;
  for (int j = 0; j < kQK; ++j) {
    const double r = static_cast<double>(x[j]) - deq[j];
    ref_err += (w ? w[j] : 1.0) * r * r;
  }
  std::sort(events.begin(), events.begin() + n,
            [](const Event& a, const Event& b) { return a.s < b.s; });
  Codes best;
  for (const int sign : {1, -1}) {
    const Codes c = sweep(x, w, events, n, sign);
    if (c.err < best.err) best = c;
  }
  if (!(best.err < ref_err)) {
    *y = ref;
    return;
  }
  store(best, y);
}

void quantize_row_search(DType t, const float* x, const float* w, void* y, int64_t n) {
  if (t != DType::Q4_0) {
    if (n % dtype_block_size(t) != 0 || !quantize_row_blocks_search(t, x, w, y, n)) {
      quantize_row(t, x, y, n);  // checks the length; the types without a search
    }
    return;
  }
  if (n % kQK != 0) fail("row length ", n, " is not a multiple of the q4_0 block size (32)");
  auto* out = static_cast<BlockQ4_0*>(y);
  for (int64_t b = 0; b < n / kQK; ++b) {
    quantize_block_q4_0_search(x + b * kQK, w ? w + b * kQK : nullptr, out + b);
  }
}

}  // namespace hearth
