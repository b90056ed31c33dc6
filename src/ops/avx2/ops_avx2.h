// Entry points of the ops' AVX2/FMA/F16C variants. Defined in this folder's files (compiled with
// those instructions); callable only when the CPU context's ISA says the machine has them.
#pragma once

#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth::ops_avx2 {

inline bool enabled(cpu::Isa isa) { return cpu::has_avx2(isa); }

// vec_avx2.cc: same contracts as the functions of ops/vec.h.
void vec_add(float* y, const float* x, int64_t n);
void vec_add_to(float* out, const float* a, const float* b, int64_t n);
void vec_mul(float* y, const float* x, int64_t n);
void vec_scale(float* y, float s, int64_t n);
void vec_axpy(float* y, float a, const float* x, int64_t n);
float vec_dot_f32(const float* a, const float* b, int64_t n);
float vec_max(const float* x, int64_t n);
double exp_sum_store(const float* x, float max, float* y, int64_t n);  // y = e^(x-max), Σ y
void f32_to_f16(const float* x, uint16_t* y, int64_t n);
int64_t select_at_least(const float* x, int64_t n, float threshold, int32_t* idx);

// norm_avx2.cc
double sum_squares(const float* x, int64_t n);  // Σ (double)(x·x)
void scale_mul(const float* x, float s, const float* w, int64_t n, float* y);  // (x·s)·w

// activation_avx2.cc: y may alias x or gate.
void silu(const float* x, int64_t n, float* y);
void gelu(const float* x, int64_t n, float* y);
void swiglu(const float* gate, const float* up, int64_t n, float* y);
void geglu(const float* gate, const float* up, int64_t n, float* y);
void vec_exp(const float* x, int64_t n, float* y);

}  // namespace hearth::ops_avx2
