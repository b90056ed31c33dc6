// AVX-512 kernels (F/BW/VL/DQ and AVX512-VNNI, plus the AVX2/FMA/F16C below them). Every function
// here may execute AVX-512 instructions, so none may be called before dispatch has confirmed that
// the CPU has them and the OS saves the zmm state.
#pragma once

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::avx512 {

// Each sets the entries its file implements: dot, gemm and gemm_gather of F32, F16 and BF16
// (gemm_float_avx512.cc), of Q8_0 and Q4_0 (gemm_quant_avx512.cc) and of the block types of
// core/quant_blocks.h (gemm_blocks_avx512.cc), axpy of Q4_0 (axpy_avx512.cc) and of the
// K-quants for one token (axpy_kquant_avx512.cc).
void set_float_kernels(Kernels& k);
void set_quant_kernels(Kernels& k);
void set_block_kernels(Kernels& k);
void set_axpy_kernels(Kernels& k);
void set_kquant_axpy_kernels(Kernels& k);
// The products over row groups: Q2_K's and Q3_K's (row_groups_avx512.cc), which also sets Q4_K's,
// Q5_K's and IQ4_XS's (row_groups_nibbles_avx512.cc), Q6_K's (row_groups_q6_k_avx512.cc) and the
// 32-weight block types' (row_groups_32_avx512.cc).
void set_row_group_kernels(Kernels& k);
void set_nibble_row_group_kernels(Kernels& k);
void set_q6_k_row_group_kernels(Kernels& k);
void set_row_group_32_kernels(Kernels& k);
// The float axpy of several tokens (axpy_tokens_avx512.cc).
void set_float_axpy_kernels(Kernels& k);

// The AVX2 table with the entries above replaced.
Kernels kernels();

}  // namespace hearth::cpu::avx512
