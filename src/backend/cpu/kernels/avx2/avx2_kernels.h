// AVX2/FMA/F16C kernels. Every function here may execute AVX2 instructions, so none may be called
// before dispatch has confirmed the CPU supports them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::avx2 {

void quantize_act_q8(const float* x, void* y, int64_t n);
void quantize_act_q8k(const float* x, void* y, int64_t n);

void f16_to_float(const void* x, float* y, int64_t n);
void bf16_to_float(const void* x, float* y, int64_t n);
void q8_0_to_float(const void* x, float* y, int64_t n);
void q4_0_to_float(const void* x, float* y, int64_t n);
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n);

// Each sets the entries its file implements: dot, gemm and gemm_gather of F32, F16 and BF16
// (gemm_float_avx2.cc) and of Q8_0 and Q4_0 (gemm_quant_avx2.cc), axpy of every type
// (axpy_avx2.cc).
void set_float_kernels(Kernels& k);
void set_quant_kernels(Kernels& k);
void set_axpy_kernels(Kernels& k);
// The vectorized entries of the block types of core/quant_blocks.h (gemm_blocks_avx2.cc), over a
// table whose block-type entries are the scalar references.
void set_block_kernels(Kernels& k);

// The products over row groups of every type that has them: the K-quants and IQ4_XS
// (row_groups_avx2.cc) and the 32-weight types (set_row_group_32_kernels, row_groups_32_avx2.cc).
void set_row_group_kernels(Kernels& k);
void set_row_group_32_kernels(Kernels& k);

// axpy_dense of F32, F16 and BF16 rows on the several-token axpy's tiles (axpy_tokens_avx2.cc).
void set_float_axpy_dense_kernels(Kernels& k);
// The several-token float axpy of this table, for F32, F16 and BF16 rows: the column-blocked
// product (axpy_tokens_avx2.cc). One token takes the row walk (axpy_avx2.cc).
void axpy_float_tokens(DType t, int64_t n, const void* w, size_t ldw, const int32_t* idx,
                       int64_t nr, const float* a, size_t lda, int64_t nt, float* y, size_t ldy);
// The Q4_0, Q8_0 and K-quant axpy entries of this table (every token count), for tables that
// replace only part of them.
void axpy_q4_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy);
void axpy_q8_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy);
// T is Q4_K, Q5_K or Q6_K (instantiated in axpy_avx2.cc).
template <DType T>
void axpy_kquant(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                 const float* a, size_t lda, int64_t nt, float* y, size_t ldy);

// The whole AVX2 table.
Kernels kernels();

}  // namespace hearth::cpu::avx2
