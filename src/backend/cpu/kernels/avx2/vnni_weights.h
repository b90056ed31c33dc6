// Q4_0 and Q8_0 weight formats for the quant tile engine (quant_tiles.h) whose 8-bit products
// are VNNI's vpdpbusd: it multiplies unsigned by signed bytes and adds each 4 adjacent products
// into an int32 lane, replacing AVX2's maddubs + madd (and the int16 add between them) with no
// intermediate saturation. Q4_0's operands are prepared exactly as for AVX2; Q8_0's are offset
// binary (quant_tiles.h). Either way the integer block sums are exact, so every output is
// identical to the AVX2 kernels'.
//
// Dp::dot(acc, u, s) is the 256-bit vpdpbusd of one ISA (VnniDp below).
#pragma once

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/quant_tiles.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// VNNI's products in every form the AVX2 engines take: dot (the formats below, panel_ymm.h) and
// dot_narrow, dot_wide and scaled (block_tiles.h, in place of MaddAvx2's). E gives one
// encoding's two instructions, dpbusd(acc, u, s) and dpwssd(acc, p, c): the VEX forms (AVX-VNNI)
// or the EVEX ones (AVX512-VNNI with VL). They compute the same exact int32 lanes as
// maddubs + madd. Instantiate with an E of the caller's anonymous namespace.
template <typename E>
struct VnniDp {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return E::dpbusd(acc, u, s); }
  static __m256i dot_narrow(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
    return dot(dot(_mm256_setzero_si256(), u0, s0), u1, s1);
  }
  // No int16 stage to overflow: the same instructions as dot_narrow.
  static __m256i dot_wide(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
    return dot_narrow(u0, s0, u1, s1);
  }
  static __m256i scaled(__m256i p0, __m256i c0, __m256i p1, __m256i c1) {
    return E::dpwssd(_mm256_madd_epi16(p0, c0), p1, c1);
  }
};

template <typename Dp>
struct VnniQ4_0 : Q4_0Format {
  // Lanes 0-3: partial sums of u . x for block b, lanes 4-7 for block b + 1.
  static __m256i products(const Pair& w, __m256i x_lo, __m256i x_hi) {
    return Dp::dot(Dp::dot(_mm256_setzero_si256(), w.lo, x_lo), w.hi, x_hi);
  }
};

// vpdpbusd's first operand is unsigned: w + 128 (offset binary), with 128 times the activation
// sums taken off after the tree. Lanes reach 8 * 255 * 127 before it, and the block sums 4 times
// that, far inside int32.
template <typename Dp>
struct VnniQ8_0 : Q8_0OffsetFormat {
  static __m256i products(const Pair& w, __m256i x_lo, __m256i x_hi) {
    return Dp::dot(Dp::dot(_mm256_setzero_si256(), w.lo, x_lo), w.hi, x_hi);
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
