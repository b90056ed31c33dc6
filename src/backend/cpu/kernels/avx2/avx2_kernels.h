// AVX2/FMA/F16C kernels. Every function here may execute AVX2 instructions, so none may be called
// before dispatch has confirmed the CPU supports them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::avx2 {

void quantize_act_q8(const float* x, void* y, int64_t n);

void f16_to_float(const void* x, float* y, int64_t n);
void bf16_to_float(const void* x, float* y, int64_t n);
void q8_0_to_float(const void* x, float* y, int64_t n);
void q4_0_to_float(const void* x, float* y, int64_t n);
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n);

float dot_f32(int64_t n, const void* w, const void* x);
float dot_f16(int64_t n, const void* w, const void* x);
float dot_bf16(int64_t n, const void* w, const void* x);
float dot_q8_0(int64_t n, const void* w, const void* x);
float dot_q4_0(int64_t n, const void* w, const void* x);

void gemm_f32(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
              int64_t nt, float* y, size_t ldy);
void gemm_f16(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
              int64_t nt, float* y, size_t ldy);
void gemm_bf16(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy);
void gemm_q8_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy);
void gemm_q4_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy);

// The whole AVX2 table.
Kernels kernels();

}  // namespace hearth::cpu::avx2
