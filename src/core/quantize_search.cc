// Q4_0 blocks with the scale chosen to minimise the squared error, for writing model files.
// ggml's reference maps the value of largest magnitude to -8 exactly, which wastes most of the
// 16 levels on a block with one outlier; trying a few scales around it and refitting the scale to
// the chosen codes by least squares cuts the error per block (the format and the kernels are
// unchanged: any scale is a valid block).
#include <cmath>
#include <cstdint>

#include "core/fp16.h"
#include "core/quantize.h"

namespace hearth {
namespace {



struct Fit {
  float err = INFINITY;
  uint16_t d = 0;
  int8_t q[kQK] = {};
};

// Codes for the inverse scale iscale, the least-squares scale for them (rounded to f16 as stored)
// and its squared error.
Fit fit(const float* x, float iscale) {
  Fit f;
  float sxq = 0.0f, sqq = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float v = std::nearbyint(x[j] * iscale);
    const int q = static_cast<int>(v < -8.0f ? -8.0f : v > 7.0f ? 7.0f : v);
    f.q[j] = static_cast<int8_t>(q);
    sxq += x[j] * q;
    sqq += static_cast<float>(q * q);
  }
  if (sqq == 0.0f) return f;
  f.d = fp32_to_fp16(sxq / sqq);
  const float d = fp16_to_fp32(f.d);
  f.err = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float e = x[j] - d * f.q[j];
    f.err += e * e;
  }
  return f;
}

}  // namespace

void quantize_block_q4_0_search(const float* x, BlockQ4_0* y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  Fit best;
  if (amax > 0.0f) {
    // The largest value mapped to -8 (ggml's choice) or to +7, and levels a little inside or
    // outside those, each refitted; then one more refit from the best scale found.
    for (int is = -12; is <= 12; ++is) {
      for (const float level : {-8.0f, 7.0f}) {
        const Fit f = fit(x, (level + 0.1f * is * (level < 0 ? -1.0f : 1.0f)) / max);
        if (f.err < best.err) best = f;
      }
    }
    const float d = fp16_to_fp32(best.d);
    if (d != 0.0f) {
      const Fit f = fit(x, 1.0f / d);
      if (f.err < best.err) best = f;
    }
  }
  if (!(best.err < INFINITY)) {
    quantize_block_q4_0(x, y);  // all zeros
    return;
  }
  y->d = best.d;
  for (int j = 0; j < kQK / 2; ++j) {
    y->qs[j] = static_cast<uint8_t>((best.q[j] + 8) | ((best.q[j + kQK / 2] + 8) << 4));
  }
}

void quantize_row_search(DType t, const float* x, void* y, int64_t n) {
  if (t != DType::Q4_0) {
    quantize_row(t, x, y, n);
    return;
  }
  auto* out = static_cast<BlockQ4_0*>(y);
  for (int64_t b = 0; b < n / kQK; ++b) quantize_block_q4_0_search(x + b * kQK, out + b);
}

}  // namespace hearth
