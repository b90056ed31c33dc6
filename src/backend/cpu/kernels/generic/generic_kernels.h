// Scalar reference kernels: portable C++ that defines what every vectorised variant must compute.
// Quantized dot products work on the same Q8 activation rows as the fast paths, so fast and
// reference results differ only by float summation order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::generic {

// Number of independent partial sums: float dot products give lane j the elements i = j (mod 8),
// quantized ones the blocks b = j (mod 8). The AVX2 kernels keep one vector lane per partial
// sum, so the reference adds in the same order and differs from them only by FMA rounding.
inline constexpr int kLanes = 8;

// Activation quantization: x[n] -> planar Q8 row (see ActFormat::Q8).
void quantize_act_q8(const float* x, void* y, int64_t n);

void f16_to_float(const void* x, float* y, int64_t n);
void bf16_to_float(const void* x, float* y, int64_t n);
void f32_to_float(const void* x, float* y, int64_t n);
void q8_0_to_float(const void* x, float* y, int64_t n);
void q4_0_to_float(const void* x, float* y, int64_t n);
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n);

float dot_f32(int64_t n, const void* w, const void* x);
float dot_f16(int64_t n, const void* w, const void* x);
float dot_bf16(int64_t n, const void* w, const void* x);
float dot_q8_0(int64_t n, const void* w, const void* x);
float dot_q4_0(int64_t n, const void* w, const void* x);

// The scalar gemm: every (token, row) pair through the row's reference dot product.
template <float (*Dot)(int64_t, const void*, const void*)>
void gemm_rows(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t r = 0; r < nr; ++r) {
      y[t * ldy + r] = Dot(n, static_cast<const uint8_t*>(w) + r * ldw,
                           static_cast<const uint8_t*>(x) + t * ldx);
    }
  }
}

// The whole scalar table.
Kernels kernels();

}  // namespace hearth::cpu::generic
