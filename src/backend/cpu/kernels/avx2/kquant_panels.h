// The super-block formats for the row-panel engine (panel_engine.h): Q2_K to Q6_K and IQ4_XS,
// the prompt counterparts of block_formats_256.h (and of avx512/'s wide forms), with the same
// bits. A super-block is one activation group; each of its 8 sub-blocks of 32 is a panel block.
// The side data per sub-block and row are its scales (and mins) and the super-block's factors,
// and each finish applies them as the tile format's finish does. Formats with a scale per 16
// weights (Q2_K, Q3_K, Q6_K) keep two sums per sub-block and scale them in integers. Include only
// from files compiled with the avx2/ flags or more.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/quant_blocks.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/quant_panels.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// What the super-block formats share. Derived gives row(b, k), sub-block k's unsigned codes of a
// row in weight order, and row_side(b, at), which writes a row's side data: sub-block k's at
// at[k * kSide * kPanelRows], one value of 16 rows per slot.
template <typename Derived, typename B>
struct SuperBlockPanelFormat {
  using Block = B;
  static constexpr int kGroupBlocks = 1;
  // One super-block of 16 rows (rows[r] null past the matrix: a zero block) into the panel.
  template <typename V>
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int, uint8_t* codes,
                         float* side) {
    static const B kZero{};
    const B* b[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) {
      b[r] = rows[r] ? reinterpret_cast<const B*>(rows[r]) : &kZero;
      Derived::row_side(*b[r], side + r);
    }
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k) {
      __m256i c[kPanelRows];
      for (int r = 0; r < kPanelRows; ++r) c[r] = Derived::row(*b[r], k);
      V::store_runs(c, codes + k * kPanelBlockBytes);
    }
  }
};

// The 32 bytes at p shifted right by `shift` bits and masked: the codes packed `shift` bits up
// in every byte.
inline __m256i bit_field_row(const uint8_t* p, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                           _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(static_cast<char>(mask)));
}
inline void store_int(float* at, int32_t v) { std::memcpy(at, &v, sizeof v); }

// Q4_K and Q5_K: unsigned codes with a 6-bit scale and min per sub-block.
template <typename Derived, typename B>
struct K4PanelFormat : SuperBlockPanelFormat<Derived, B> {
  static constexpr int kSide = 4;  // [scale][min][d][dmin]
  static constexpr int kSums = 1;

  static int32_t start(int32_t) { return 0; }
  // acc + (isum * scale) * (d * dx) - (min * xs) * (dmin * dx), as K4Group::finish rounds it.
  template <typename V>
  static typename V::F finish(const float* side, const typename V::I (&isum)[1],
                              const BlockActs<V>& a, typename V::F acc) {
    const auto scaled = V::mul(V::to_float(isum[0]), V::load(side));
    acc = V::fmadd(scaled, V::mul(V::load(side + 2 * kPanelRows), a.dx), acc);
    const auto mins = V::mul(V::load(side + kPanelRows), V::set1(static_cast<float>(a.xs)));
    return V::fnmadd(mins, V::mul(V::load(side + 3 * kPanelRows), a.dx), acc);
  }
  static void row_side(const B& b, float* at) {
    const float d = half_to_float(b.d), dmin = half_to_float(b.dmin);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      const ScaleMin sm = k4_scale_min(b.scales, k);
      at[0] = static_cast<float>(sm.scale);
      at[kPanelRows] = static_cast<float>(sm.min);
      at[2 * kPanelRows] = d;
      at[3 * kPanelRows] = dmin;
    }
  }
};

// Sub-block k's nibbles: the low (k even) or high nibbles of qs[32 (k / 2) + l].
template <typename B>
__m256i k4_nibbles(const B& b, int k) {
  return bit_field_row(b.qs + 32 * (k / 2), 4 * (k % 2), 0x0f);
}

struct PanelQ4_K : K4PanelFormat<PanelQ4_K, BlockQ4_K> {
  static constexpr int kMaxCode = 15;
  static __m256i row(const BlockQ4_K& b, int k) { return k4_nibbles(b, k); }
};

struct PanelQ5_K : K4PanelFormat<PanelQ5_K, BlockQ5_K> {
  static constexpr int kMaxCode = 31;
  // The nibbles plus bit k of qh[l] as bit 4.
  static __m256i row(const BlockQ5_K& b, int k) {
    return _mm256_or_si256(k4_nibbles(b, k), _mm256_slli_epi16(bit_field_row(b.qh, k, 1), 4));
  }
};

// Q6_K and Q3_K: codes u standing for u - C, a signed scale per 16 weights and one f16 d. Each
// half of a sub-block has its own sum, started at -C times the half's activation sum, so that it
// is the half's (u - C) . x; the halves are scaled in integers and finished as OffsetFormat
// does. Derived gives scale16(b, s), the scale of weights 16s..16s+15.
template <typename Derived, typename B, int C>
struct Offset16PanelFormat : SuperBlockPanelFormat<Derived, B> {
  static constexpr int kSide = 3;  // [scale of weights 0-15 (int32)][of 16-31 (int32)][d]
  static constexpr int kSums = 2;
  static constexpr int kMaxCode = 2 * C - 1;

  static int32_t start(int32_t s) { return -C * s; }
  template <typename V>
  static typename V::F finish(const float* side, const typename V::I (&sums)[2],
                              const BlockActs<V>& a, typename V::F acc) {
    const auto lo = V::mullo(sums[0], V::loadi(side));
    const auto hi = V::mullo(sums[1], V::loadi(side + kPanelRows));
    const auto d = V::load(side + 2 * kPanelRows);
    return V::fmadd(V::to_float(V::addi(lo, hi)), V::mul(d, a.dx), acc);
  }
  static void row_side(const B& b, float* at) {
    const float d = half_to_float(b.d);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      store_int(at, Derived::scale16(b, 2 * k));
      store_int(at + kPanelRows, Derived::scale16(b, 2 * k + 1));
      at[2 * kPanelRows] = d;
    }
  }
};

struct PanelQ6_K : Offset16PanelFormat<PanelQ6_K, BlockQ6_K, 32> {
  static int32_t scale16(const BlockQ6_K& b, int s) { return b.scales[s]; }
  // Sub-block k = 4h + j: low 4 bits from the low (j < 2) or high nibbles of
  // ql[64h + 32 (j & 1) + l], top 2 bits from bits 2j of qh[32h + l].
  static __m256i row(const BlockQ6_K& b, int k) {
    const int h = k / 4, j = k % 4;
    const __m256i low = bit_field_row(b.ql + 64 * h + 32 * (j & 1), j < 2 ? 0 : 4, 0x0f);
    const __m256i top = bit_field_row(b.qh + 32 * h, 2 * j, 3);
    return _mm256_or_si256(low, _mm256_slli_epi16(top, 4));
  }
};

struct PanelQ3_K : Offset16PanelFormat<PanelQ3_K, BlockQ3_K, 4> {
  static int32_t scale16(const BlockQ3_K& b, int s) { return q3k_scale(b.scales, s) - 32; }
  // Sub-block k = 4h + j: bits 2j of qs[32h + l], and bit k of hmask[l] as bit 2.
  static __m256i row(const BlockQ3_K& b, int k) {
    const int h = k / 4, j = k % 4;
    const __m256i low = bit_field_row(b.qs + 32 * h, 2 * j, 3);
    const __m256i high = bit_field_row(b.hmask, k, 1);
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
  }
};

// Q2_K: 2-bit codes with a 4-bit scale and min per 16 weights, d and dmin. Two sums per
// sub-block as Q6_K's (started at zero); the mins meet the activations' sums per 16, and both
// terms are finished as FormatQ2_K does: S * (d * dx) + M * (-dmin * dx).
struct PanelQ2_K : SuperBlockPanelFormat<PanelQ2_K, BlockQ2_K> {
  // [scale 0-15][scale 16-31][min 0-15][min 16-31] (int32), [d][-dmin]
  static constexpr int kSide = 6;
  static constexpr int kSums = 2;
  static constexpr int kMaxCode = 3;

  static int32_t start(int32_t) { return 0; }
  template <typename V>
  static typename V::F finish(const float* side, const typename V::I (&sums)[2],
                              const BlockActs<V>& a, typename V::F acc) {
    const auto vec = [side](int i) { return V::loadi(side + i * kPanelRows); };
    const auto s = V::addi(V::mullo(sums[0], vec(0)), V::mullo(sums[1], vec(1)));
    const auto m =
        V::addi(V::mullo(V::set1i(a.halves[0]), vec(2)), V::mullo(V::set1i(a.halves[1]), vec(3)));
    acc = V::fmadd(V::to_float(s), V::mul(V::load(side + 4 * kPanelRows), a.dx), acc);
    return V::fmadd(V::to_float(m), V::mul(V::load(side + 5 * kPanelRows), a.dx), acc);
  }
  static void row_side(const BlockQ2_K& b, float* at) {
    const float d = half_to_float(b.d), neg_dmin = -half_to_float(b.dmin);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      for (int h = 0; h < 2; ++h) {
        store_int(at + h * kPanelRows, b.scales[2 * k + h] & 15);
        store_int(at + (2 + h) * kPanelRows, b.scales[2 * k + h] >> 4);
      }
      at[4 * kPanelRows] = d;
      at[5 * kPanelRows] = neg_dmin;
    }
  }
  // Sub-block k = 4h + j: bits 2j of qs[32h + l].
  static __m256i row(const BlockQ2_K& b, int k) {
    return bit_field_row(b.qs + 32 * (k / 4), 2 * (k % 4), 3);
  }
};

// IQ4_XS: the IQ4 code book as offset binary, a 6-bit scale (minus 32) per sub-block and one d.
struct PanelIQ4_XS : SuperBlockPanelFormat<PanelIQ4_XS, BlockIQ4_XS> {
  static constexpr int kSide = 2;  // [scale][d]
  static constexpr int kSums = 1;
  static constexpr int kMaxCode = 255;

  static int32_t start(int32_t xs) { return -128 * xs; }
  // acc + (isum * scale) * (d * dx), as FormatIQ4_XS rounds it.
  template <typename V>
  static typename V::F finish(const float* side, const typename V::I (&isum)[1],
                              const BlockActs<V>& a, typename V::F acc) {
    const auto scaled = V::mul(V::to_float(isum[0]), V::load(side));
    return V::fmadd(scaled, V::mul(V::load(side + kPanelRows), a.dx), acc);
  }
  static void row_side(const BlockIQ4_XS& b, float* at) {
    const float d = half_to_float(b.d);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      at[0] = static_cast<float>(iq4xs_scale(b, k) - 32);
      at[kPanelRows] = d;
    }
  }
  // Sub-block k: the nibbles of qs[16k..16k+15], low ones the first 16 weights.
  static __m256i row(const BlockIQ4_XS& b, int k) { return iq4_row(unpack_nibbles(b.qs + 16 * k)); }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
