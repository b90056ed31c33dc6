// Scalar row conversions and the reference activation quantizer.
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"
#include "core/quantize.h"

namespace hearth::cpu::generic {

void quantize_act_q8(const float* x, void* y, int64_t n) {
  auto* qs = static_cast<int8_t*>(y);
  auto* d = reinterpret_cast<float*>(qs + n);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* xb = x + b * kQK;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    // Same arithmetic as ggml's Q8_0 reference: the quants come from the unrounded scale, the
    // stored scale is rounded through f16.
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    d[b] = fp16_to_fp32(fp32_to_fp16(scale));
    for (int64_t j = 0; j < kQK; ++j) qs[b * kQK + j] = static_cast<int8_t>(std::round(xb[j] * inv));
  }
}

void f32_to_float(const void* x, float* y, int64_t n) {
  std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}
void f16_to_float(const void* x, float* y, int64_t n) {
  dequantize_row(DType::F16, x, y, n);
}
void bf16_to_float(const void* x, float* y, int64_t n) {
  dequantize_row(DType::BF16, x, y, n);
}
void q8_0_to_float(const void* x, float* y, int64_t n) {
  dequantize_row(DType::Q8_0, x, y, n);
}
void q4_0_to_float(const void* x, float* y, int64_t n) {
  dequantize_row(DType::Q4_0, x, y, n);
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

}  // namespace hearth::cpu::generic
