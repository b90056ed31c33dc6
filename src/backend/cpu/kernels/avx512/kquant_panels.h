// The super-block formats for the row-panel engine (panel_engine.h): Q2_K to Q6_K and IQ4_XS,
// the prompt counterparts of block_formats_256.h (and of their 512-bit forms), with the same
// bits. A super-block is one activation group; each of its 8 sub-blocks of 32 is a panel block.
// The side data per sub-block and row are its scales (and mins) and the super-block's factors,
// and each finish applies them as the tile format's finish does. Formats with a scale per 16
// weights (Q2_K, Q3_K, Q6_K) keep two sums per sub-block and scale them in integers. Include only
// from files compiled with the avx512/ flags.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/quant_blocks.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx512/quant_panels.h"

namespace hearth::cpu::avx512 {

// One super-block of 16 rows (rows[r] null past the matrix: a zero block) into the panel, for a
// format F with two_rows(a, b, k), sub-block k's unsigned codes of a row pair ([a | b] in weight
// order), and row_side(b, at), which writes a row's side data: sub-block k's at
// at[k * kSide * kPanelRows], one vector of 16 rows per value.
template <typename F>
void pack_super_blocks(const uint8_t* const (&rows)[kPanelRows], uint8_t* codes, float* side) {
  using B = typename F::Block;
  static const B kZero{};
  const B* b[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) {
    b[r] = rows[r] ? reinterpret_cast<const B*>(rows[r]) : &kZero;
    F::row_side(*b[r], side + r);
  }
  for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k) {
    __m512i a[8];
    for (int i = 0; i < 8; ++i) a[i] = F::two_rows(*b[2 * i], *b[2 * i + 1], k);
    store_runs(a, codes + k * kPanelBlockBytes);
  }
}

template <typename Derived, typename B>
struct SuperBlockPanelFormat {
  using Block = B;
  static constexpr int kGroupBlocks = 1;
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int, uint8_t* codes,
                         float* side) {
    pack_super_blocks<Derived>(rows, codes, side);
  }
};

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// The 32 bytes at pa and pb of two rows, each shifted right by `shift` bits and masked: the
// codes packed `shift` bits up in every byte.
inline __m512i bit_field_rows(const uint8_t* pa, const uint8_t* pb, int shift, int mask) {
  return _mm512_and_si512(_mm512_srl_epi16(join(load32(pa), load32(pb)), _mm_cvtsi32_si128(shift)),
                          _mm512_set1_epi8(static_cast<char>(mask)));
}
inline void store_int(float* at, int32_t v) { std::memcpy(at, &v, sizeof v); }

// Q4_K and Q5_K: unsigned codes with a 6-bit scale and min per sub-block.
template <typename Derived, typename B>
struct K4PanelFormat : SuperBlockPanelFormat<Derived, B> {
  static constexpr int kSide = 4;  // [scale][min][d][dmin]
  static constexpr int kSums = 1;

  static int32_t start(int32_t) { return 0; }
  // acc + (isum * scale) * (d * dx) - (min * xs) * (dmin * dx), as K4Group::finish rounds it.
  static __m512 finish(const float* side, const __m512i (&isum)[1], const BlockActs& a,
                       __m512 acc) {
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[0]), _mm512_load_ps(side));
    acc = _mm512_fmadd_ps(scaled, _mm512_mul_ps(_mm512_load_ps(side + 2 * kPanelRows), a.dx), acc);
    const __m512 mins =
        _mm512_mul_ps(_mm512_load_ps(side + kPanelRows), _mm512_set1_ps(static_cast<float>(a.xs)));
    return _mm512_fnmadd_ps(mins, _mm512_mul_ps(_mm512_load_ps(side + 3 * kPanelRows), a.dx), acc);
  }
  static void row_side(const B& b, float* at) {
    const float d = avx2::half_to_float(b.d), dmin = avx2::half_to_float(b.dmin);
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
__m512i k4_nibbles(const B& a, const B& b, int k) {
  return bit_field_rows(a.qs + 32 * (k / 2), b.qs + 32 * (k / 2), 4 * (k % 2), 0x0f);
}

struct PanelQ4_K : K4PanelFormat<PanelQ4_K, BlockQ4_K> {
  static __m512i two_rows(const BlockQ4_K& a, const BlockQ4_K& b, int k) {
    return k4_nibbles(a, b, k);
  }
};

struct PanelQ5_K : K4PanelFormat<PanelQ5_K, BlockQ5_K> {
  // The nibbles plus bit k of qh[l] as bit 4.
  static __m512i two_rows(const BlockQ5_K& a, const BlockQ5_K& b, int k) {
    const __m512i fifth = bit_field_rows(a.qh, b.qh, k, 1);
    return _mm512_or_si512(k4_nibbles(a, b, k), _mm512_slli_epi16(fifth, 4));
  }
};

// Q6_K and Q3_K: codes u standing for u - C, a signed scale per 16 weights and one f16 d. Each
// half of a sub-block has its own sum, started at -C times the half's activation sum as
// OffsetAct takes C . x off; the halves are scaled in integers and finished as OffsetFormat
// does. Derived gives scale16(b, s), the scale of weights 16s..16s+15.
template <typename Derived, typename B, int C>
struct Offset16PanelFormat : SuperBlockPanelFormat<Derived, B> {
  static constexpr int kSide = 3;  // [scale of weights 0-15 (int32)][of 16-31 (int32)][d]
  static constexpr int kSums = 2;

  static int32_t start(int32_t s) { return -C * s; }
  static __m512 finish(const float* side, const __m512i (&sums)[2], const BlockActs& a,
                       __m512 acc) {
    const __m512i lo = _mm512_mullo_epi32(sums[0], _mm512_load_si512(side));
    const __m512i hi = _mm512_mullo_epi32(sums[1], _mm512_load_si512(side + kPanelRows));
    const __m512 d = _mm512_load_ps(side + 2 * kPanelRows);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), _mm512_mul_ps(d, a.dx),
                           acc);
  }
  static void row_side(const B& b, float* at) {
    const float d = avx2::half_to_float(b.d);
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
  static __m512i two_rows(const BlockQ6_K& a, const BlockQ6_K& b, int k) {
    const int h = k / 4, j = k % 4;
    const int at = 64 * h + 32 * (j & 1);
    const __m512i low = bit_field_rows(a.ql + at, b.ql + at, j < 2 ? 0 : 4, 0x0f);
    const __m512i top = bit_field_rows(a.qh + 32 * h, b.qh + 32 * h, 2 * j, 3);
    return _mm512_or_si512(low, _mm512_slli_epi16(top, 4));
  }
};

struct PanelQ3_K : Offset16PanelFormat<PanelQ3_K, BlockQ3_K, 4> {
  static int32_t scale16(const BlockQ3_K& b, int s) { return q3k_scale(b.scales, s) - 32; }
  // Sub-block k = 4h + j: bits 2j of qs[32h + l], and bit k of hmask[l] as bit 2.
  static __m512i two_rows(const BlockQ3_K& a, const BlockQ3_K& b, int k) {
    const int h = k / 4, j = k % 4;
    const __m512i low = bit_field_rows(a.qs + 32 * h, b.qs + 32 * h, 2 * j, 3);
    const __m512i high = bit_field_rows(a.hmask, b.hmask, k, 1);
    return _mm512_or_si512(low, _mm512_slli_epi16(high, 2));
  }
};

// Q2_K: 2-bit codes with a 4-bit scale and min per 16 weights, d and dmin. Two sums per
// sub-block as Q6_K's (started at zero); the mins meet the activations' sums per 16, and both
// terms are finished as FormatQ2_K does: S * (d * dx) + M * (-dmin * dx).
struct PanelQ2_K : SuperBlockPanelFormat<PanelQ2_K, BlockQ2_K> {
  // [scale 0-15][scale 16-31][min 0-15][min 16-31] (int32), [d][-dmin]
  static constexpr int kSide = 6;
  static constexpr int kSums = 2;

  static int32_t start(int32_t) { return 0; }
  static __m512 finish(const float* side, const __m512i (&sums)[2], const BlockActs& a,
                       __m512 acc) {
    const auto vec = [side](int i) { return _mm512_load_si512(side + i * kPanelRows); };
    const __m512i s =
        _mm512_add_epi32(_mm512_mullo_epi32(sums[0], vec(0)), _mm512_mullo_epi32(sums[1], vec(1)));
    const __m512i m = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_set1_epi32(a.halves[0]), vec(2)),
                                       _mm512_mullo_epi32(_mm512_set1_epi32(a.halves[1]), vec(3)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                          _mm512_mul_ps(_mm512_load_ps(side + 4 * kPanelRows), a.dx), acc);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(m),
                           _mm512_mul_ps(_mm512_load_ps(side + 5 * kPanelRows), a.dx), acc);
  }
  static void row_side(const BlockQ2_K& b, float* at) {
    const float d = avx2::half_to_float(b.d), neg_dmin = -avx2::half_to_float(b.dmin);
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
  static __m512i two_rows(const BlockQ2_K& a, const BlockQ2_K& b, int k) {
    return bit_field_rows(a.qs + 32 * (k / 4), b.qs + 32 * (k / 4), 2 * (k % 4), 3);
  }
};

// IQ4_XS: the IQ4 code book as offset binary, a 6-bit scale (minus 32) per sub-block and one d.
struct PanelIQ4_XS : SuperBlockPanelFormat<PanelIQ4_XS, BlockIQ4_XS> {
  static constexpr int kSide = 2;  // [scale][d]
  static constexpr int kSums = 1;

  static int32_t start(int32_t xs) { return -128 * xs; }
  // acc + (isum * scale) * (d * dx), as FormatIQ4_XS rounds it.
  static __m512 finish(const float* side, const __m512i (&isum)[1], const BlockActs& a,
                       __m512 acc) {
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[0]), _mm512_load_ps(side));
    return _mm512_fmadd_ps(scaled, _mm512_mul_ps(_mm512_load_ps(side + kPanelRows), a.dx), acc);
  }
  static void row_side(const BlockIQ4_XS& b, float* at) {
    const float d = avx2::half_to_float(b.d);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      at[0] = static_cast<float>(iq4xs_scale(b, k) - 32);
      at[kPanelRows] = d;
    }
  }
  // Sub-block k: the nibbles of qs[16k..16k+15], low ones the first 16 weights.
  static __m512i two_rows(const BlockIQ4_XS& a, const BlockIQ4_XS& b, int k) {
    return iq4_rows(nibble_rows(a.qs + 16 * k, b.qs + 16 * k));
  }
};

}  // namespace hearth::cpu::avx512
