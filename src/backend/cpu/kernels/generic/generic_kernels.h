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

// Adds the lanes pairwise (l0 + l4, ...), as a vector horizontal sum does. `static` for the
// reason axpy_row_active below gives.
static inline float reduce_lanes(float* lanes) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// Activation quantization: x[n] -> planar Q8 row (see ActFormat::Q8, ActFormat::Q8K).
void quantize_act_q8(const float* x, void* y, int64_t n);
void quantize_act_q8k(const float* x, void* y, int64_t n);  // n a multiple of 256

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

// Every (token, row) pair through the row's reference dot product; row r of the product is
// the weight row at row_at(r), so contiguous and gathered rows share one loop.
template <float (*Dot)(int64_t, const void*, const void*), typename RowAt>
void dot_all(int64_t n, RowAt row_at, int64_t nr, const void* x, size_t ldx, int64_t nt, float* y,
             size_t ldy) {
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t r = 0; r < nr; ++r) {
      y[t * ldy + r] = Dot(n, row_at(r), static_cast<const uint8_t*>(x) + t * ldx);
    }
  }
}

// The scalar gemm.
template <float (*Dot)(int64_t, const void*, const void*)>
void gemm_rows(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  dot_all<Dot>(
      n, [wb, ldw](int64_t r) { return wb + r * ldw; }, nr, x, ldx, nt, y, ldy);
}

// The scalar gemm_gather: the same dot products as gemm_rows, so the same bits.
template <float (*Dot)(int64_t, const void*, const void*)>
void gemm_gather_rows(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                      const void* x, size_t ldx, int64_t nt, float* y, size_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  dot_all<Dot>(
      n, [wb, ldw, idx](int64_t r) { return wb + static_cast<size_t>(idx[r]) * ldw; }, nr, x, ldx,
      nt, y, ldy);
}

// Sets axpy of every type to the scalar references (axpy.cc): y += a * w, unfused, row by row
// in index order.
void set_axpy_kernels(Kernels& k);

// The scalar axpy of a block type of core/quant_blocks.h: each active row's blocks dequantized
// exactly as dequantize_row does, then added as the other types' references add (axpy.cc).
template <DType T>
void axpy_block_rows(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, size_t lda, int64_t nt, float* y, size_t ldy);

// The K-quants whose one-token axpy sums in 8-bit integers (Q4_K, Q6_K; kAxpyGroup below): other
// token counts as axpy_block_rows. The _parts form is one call per part.
template <DType T>
void axpy_block_int(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                    const float* a, size_t lda, int64_t nt, float* y, size_t ldy);
template <DType T>
void axpy_block_int_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                          const int64_t* ends, int64_t n_parts, float* y, size_t ldy);

// Every entry of the block types of core/quant_blocks.h (Q4_1, Q5_0, Q5_1, IQ4_NL, the K-quants,
// IQ4_XS) set to the scalar references (dot_blocks.cc, block_codes.h). Vector tables start from
// these and replace what they implement.
void set_block_kernels(Kernels& k);

// Row groups of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (row_groups.cc): to_row_group and the
// scalar gemm_row_groups. Vector tables keep to_row_group and replace the product, or clear both
// where the groups do not pay.
void set_row_group_kernels(Kernels& k);
// The same for the 32-weight block types Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (row_groups_32.cc),
// part of set_row_group_kernels.
void set_row_group_32_kernels(Kernels& k);

// Whether any of the nt coefficients of row j is non-zero (a zero row is skipped unread).
// `static`, like core/fp16.h, because AVX2 files use it too and must not lend scalar callers
// their AVX-encoded copy.
static inline bool axpy_row_active(const float* a, size_t lda, int64_t nt, int64_t j) {
  for (int64_t t = 0; t < nt; ++t) {
    if (a[t * lda + j] != 0.0f) return true;
  }
  return false;
}

// One-token Q4_0 and Q8_0 axpy (decode) in 8-bit integers: the active rows (nonzero
// coefficient), in ascending j, go in consecutive groups of kAxpyGroup (the last one shorter); per
// group g and output block b the coefficients s_j = a_j * d_{j,b} (float product) are quantized
// to int8 with one scale, m = max_j |s_j|, t_j = nearbyint(s_j * (127 / m)), S = m / 127, and the
// block adds y[c] += S * sum_j t_j * q_{j,c} (q: Q4_0's nibble - 8, Q8_0's byte; the sum exact in
// integers). Blocks with m < kAxpyMinScale add nothing (their terms are below 2^-92; it keeps
// 127 / m finite). The grouping depends only on the coefficients, not on the columns, so results
// do not depend on how callers split the columns. See generic/axpy.cc for the accuracy argument.
// One-token Q4_K and Q6_K do the same per unit of 16 columns (half a 32-weight block, the finest
// scale either has), in the integer form of block_codes.h: s_j = a_j * (D_j * s_j,h), then
// y[c] += S * sum_j t_j * q_{j,c}, and for types with mins y[c] += sum_j a_j * (M_j * m_j,h)
// (float, in ascending j) after it, whether or not the unit's m reached kAxpyMinScale.
inline constexpr int kAxpyGroup = 32;
inline constexpr float kAxpyMinScale = 0x1p-100f;

// The whole scalar table.
Kernels kernels();

}  // namespace hearth::cpu::generic
