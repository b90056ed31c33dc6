// AVX-VNNI variants of the quantized kernels. Every function here may execute AVX2 and AVX-VNNI
// instructions, so none may be called before dispatch has confirmed the CPU supports them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::avxvnni {

float dot_q8_0(int64_t n, const void* w, const void* x);
float dot_q4_0(int64_t n, const void* w, const void* x);

void gemm_q8_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy);
void gemm_q4_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy);

// The AVX2 table with the Q8_0 and Q4_0 dot and gemm kernels replaced.
Kernels kernels();

}  // namespace hearth::cpu::avxvnni
