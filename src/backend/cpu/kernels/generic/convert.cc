// Scalar row conversions and the reference activation quantizers.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quantize.h"
#include "core/quantize_fit.h"

namespace hearth::cpu::generic {
namespace {

// Block b of an activation row: its quants, its scale and its sums (act_layout.h): the sum of all
// 32 quants, or in a Q8K row (q8k) the sums of the first and the last 16.
void store_act_block(const int8_t (&q)[kQK], float d, bool q8k, uint8_t* row, int64_t b) {
  int16_t half[2] = {0, 0};
  for (int64_t j = 0; j < kQK; ++j) {
    row[act_quant_offset(b, j)] = static_cast<uint8_t>(q[j]);
    half[j / 16] = static_cast<int16_t>(half[j / 16] + q[j]);
  }
  store_act_sums(row, b, d, half, q8k);
}

}  // namespace

void quantize_act_q8(const float* x, void* y, int64_t n) {
  auto* row = static_cast<uint8_t*>(y);
  const int64_t nb = n / kQK;
  // Padding blocks of the last group must read as zero quants with zero scale.
  const int64_t padded = act_q8_row_bytes(n);
  const int64_t tail_begin = nb / kActGroupBlocks * kActGroupBytes;
  std::memset(row + tail_begin, 0, static_cast<size_t>(padded - tail_begin));
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    // Same arithmetic as ggml's Q8_0 reference: the quants come from the unrounded scale, the
    // stored scale is rounded through f16.
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    const float d = fp16_to_fp32(fp32_to_fp16(scale));
    int8_t q[kQK];
    for (int64_t j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>(std::round(xb[j] * inv));
    store_act_block(q, d, false, row, b);
  }
}

void quantize_act_q8k(const float* x, void* y, int64_t n) {
  auto* row = static_cast<uint8_t*>(y);
  for (int64_t g = 0; g < n / kQK_K; ++g) {
    const float* xg = x + g * kQK_K;
    const float max = qfit::signed_absmax(static_cast<int>(kQK_K), xg);
    const float amax = std::fabs(max);
    // ggml's Q8_K: the value of largest magnitude maps to -127, quants round half to even and
    // stop at 127, and the scale (its reciprocal) stays a float.
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    for (int64_t k = 0; k < kActGroupBlocks; ++k) {
      const int64_t b = g * kActGroupBlocks + k;
      int8_t q[kQK];
      for (int64_t j = 0; j < kQK; ++j) {
        q[j] = static_cast<int8_t>(
            std::min(127, static_cast<int>(std::nearbyint(iscale * xg[k * kQK + j]))));
      }
      store_act_block(q, d, true, row, b);
    }
  }
}

void f32_to_float(const void* x, float* y, int64_t n) {
  std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}
void f16_to_float(const void* x, float* y, int64_t n) { dequantize_row(DType::F16, x, y, n); }
void bf16_to_float(const void* x, float* y, int64_t n) { dequantize_row(DType::BF16, x, y, n); }
void q8_0_to_float(const void* x, float* y, int64_t n) { dequantize_row(DType::Q8_0, x, y, n); }
void q4_0_to_float(const void* x, float* y, int64_t n) { dequantize_row(DType::Q4_0, x, y, n); }

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

}  // namespace hearth::cpu::generic
