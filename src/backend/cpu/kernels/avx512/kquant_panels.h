// Q4_K, Q5_K and Q6_K for the row-panel engine (panel_engine.h): the prompt counterpart of the
// 512-bit block tiles (wide_block_tiles.h), with the same bits. A super-block is one activation
// group; each of its 8 sub-blocks is a panel block whose unsigned codes (0-15, or 0-31 with
// Q5_K's fifth bit) enter vpdpbusd as they are. The side data per sub-block and row are the
// 6-bit scale and min and the super-block's d and dmin as floats, and finish applies them as
// K4Group::finish (block_formats_256.h) does. Include only from files compiled with the
// avx512/ flags.
#pragma once

#include <cstdint>
#include <cstring>

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats.h"
#include "backend/cpu/kernels/avx512/panel_engine.h"

namespace hearth::cpu::avx512 {

// One super-block of 16 rows (rows[r] null past the matrix: a zero block) into the panel, for a
// format F with two_rows(a, b, k), sub-block k's codes of a row pair, and row_side(b, at).
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

// What Q4_K and Q5_K share. Derived gives two_rows(a, b, k): sub-block k's 32 codes of rows a
// and b, [a | b] in weight order.
template <typename Derived, typename B>
struct K4PanelFormat {
  using Block = B;
  static constexpr int kGroupBlocks = 1;
  // Per sub-block: [scale][min][d][dmin], 16 rows each.
  static constexpr int kSide = 4;
  static constexpr int kSums = 1;

  static int32_t start(int32_t) { return 0; }
  // acc + (isum * scale) * (d * dx) - (min * xs) * (dmin * dx), each product rounded as the
  // tiles round it.
  static __m512 finish(const float* side, const __m512i (&isum)[1], __m512 dx, int32_t xs,
                       __m512 acc) {
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[0]), _mm512_load_ps(side));
    acc = _mm512_fmadd_ps(scaled, _mm512_mul_ps(_mm512_load_ps(side + 2 * kPanelRows), dx), acc);
    const __m512 mins =
        _mm512_mul_ps(_mm512_load_ps(side + kPanelRows), _mm512_set1_ps(static_cast<float>(xs)));
    return _mm512_fnmadd_ps(mins, _mm512_mul_ps(_mm512_load_ps(side + 3 * kPanelRows), dx), acc);
  }

  // Row side data: sub-block k's at at[k * kSide * kPanelRows], rows 1 apart.
  static void row_side(const B& b, float* at) {
    const avx2::K4ScaleBytes s = avx2::k4_scale_bytes(b.scales);
    const float d = avx2::half_to_float(b.d), dmin = avx2::half_to_float(b.dmin);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      at[0] = static_cast<float>((s.scales >> (8 * k)) & 0xff);
      at[kPanelRows] = static_cast<float>((s.mins >> (8 * k)) & 0xff);
      at[2 * kPanelRows] = d;
      at[3 * kPanelRows] = dmin;
    }
  }
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int, uint8_t* codes,
                         float* side) {
    pack_super_blocks<Derived>(rows, codes, side);
  }
};

// Sub-block k's nibbles of a row pair: the low (k even) or high nibbles of qs[32 (k / 2) + l].
inline __m512i k4_nibbles(const uint8_t* qa, const uint8_t* qb, int k) {
  const int half = 32 * (k / 2);
  const __m512i both = join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + half)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + half)));
  const __m512i shifted = (k % 2) != 0 ? _mm512_srli_epi16(both, 4) : both;
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
}

struct PanelQ4_K : K4PanelFormat<PanelQ4_K, BlockQ4_K> {
  static __m512i two_rows(const BlockQ4_K& a, const BlockQ4_K& b, int k) {
    return k4_nibbles(a.qs, b.qs, k);
  }
};

struct PanelQ5_K : K4PanelFormat<PanelQ5_K, BlockQ5_K> {
  // The nibbles plus bit k of qh[l] as bit 4.
  static __m512i two_rows(const BlockQ5_K& a, const BlockQ5_K& b, int k) {
    const __m512i qh = join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qh)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    const __m512i bit =
        _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(k)), _mm512_set1_epi8(1));
    return _mm512_or_si512(k4_nibbles(a.qs, b.qs, k), _mm512_slli_epi16(bit, 4));
  }
};

// Q6_K: 6-bit codes u standing for u - 32, a signed 8-bit scale per 16 weights and one f16 d.
// Each half of a sub-block has its own sum, started at -32 times the half's activation sum, as
// OffsetAct takes c . x off; the halves are scaled in integers and finished as OffsetFormat does.
struct PanelQ6_K {
  using Block = BlockQ6_K;
  static constexpr int kGroupBlocks = 1;
  // Per sub-block: [scale of weights 0-15 (int32)][scale of 16-31 (int32)][d], 16 rows each.
  static constexpr int kSide = 3;
  static constexpr int kSums = 2;

  static int32_t start(int32_t s) { return -32 * s; }
  static __m512 finish(const float* side, const __m512i (&sums)[2], __m512 dx, int32_t,
                       __m512 acc) {
    const __m512i lo = _mm512_mullo_epi32(sums[0], _mm512_load_si512(side));
    const __m512i hi = _mm512_mullo_epi32(sums[1], _mm512_load_si512(side + kPanelRows));
    const __m512 d = _mm512_load_ps(side + 2 * kPanelRows);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), _mm512_mul_ps(d, dx), acc);
  }

  // Sub-block k = 4h + j of a row pair: low 4 bits from the low (j < 2) or high nibbles of
  // ql[64h + 32 (j & 1) + l], top 2 bits from bits 2j of qh[32h + l].
  static __m512i two_rows(const BlockQ6_K& a, const BlockQ6_K& b, int k) {
    const int h = k / 4, j = k % 4;
    const auto load = [](const uint8_t* p) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    };
    const int at = 64 * h + 32 * (j & 1);
    const __m512i ql = join(load(a.ql + at), load(b.ql + at));
    const __m512i qh = join(load(a.qh + 32 * h), load(b.qh + 32 * h));
    const __m512i low = _mm512_and_si512(_mm512_srl_epi16(ql, _mm_cvtsi32_si128(j < 2 ? 0 : 4)),
                                         _mm512_set1_epi8(0x0f));
    const __m512i top =
        _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), _mm512_set1_epi8(3));
    return _mm512_or_si512(low, _mm512_slli_epi16(top, 4));
  }

  // Row side data: sub-block k's at at[k * kSide * kPanelRows], rows 1 apart.
  static void row_side(const BlockQ6_K& b, float* at) {
    const float d = avx2::half_to_float(b.d);
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k, at += kSide * kPanelRows) {
      const int32_t lo = b.scales[2 * k], hi = b.scales[2 * k + 1];
      std::memcpy(at, &lo, sizeof lo);
      std::memcpy(at + kPanelRows, &hi, sizeof hi);
      at[2 * kPanelRows] = d;
    }
  }
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int, uint8_t* codes,
                         float* side) {
    pack_super_blocks<PanelQ6_K>(rows, codes, side);
  }
};

}  // namespace hearth::cpu::avx512
