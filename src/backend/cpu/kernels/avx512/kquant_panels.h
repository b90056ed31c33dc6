// Q4_K and Q5_K for the row-panel engine (panel_engine.h): the prompt counterpart of the
// 512-bit block tiles (wide_block_tiles.h), with the same bits. A super-block is one activation
// group; each of its 8 sub-blocks is a panel block whose unsigned codes (0-15, or 0-31 with
// Q5_K's fifth bit) enter vpdpbusd as they are. The side data per sub-block and row are the
// 6-bit scale and min and the super-block's d and dmin as floats, and finish applies them as
// K4Group::finish (block_formats_256.h) does. Include only from files compiled with the
// avx512/ flags.
#pragma once

#include <cstdint>

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats.h"
#include "backend/cpu/kernels/avx512/panel_engine.h"

namespace hearth::cpu::avx512 {

// What Q4_K and Q5_K share. Derived gives two_rows(a, b, k): sub-block k's 32 codes of rows a
// and b, [a | b] in weight order.
template <typename Derived, typename B>
struct K4PanelFormat {
  using Block = B;
  static constexpr int kGroupBlocks = 1;
  // Per sub-block: [scale][min][d][dmin], 16 rows each.
  static constexpr int kSide = 4;

  static int32_t start(int32_t) { return 0; }
  // acc + (isum * scale) * (d * dx) - (min * xs) * (dmin * dx), each product rounded as the
  // tiles round it.
  static __m512 finish(const float* side, __m512i isum, __m512 dx, int32_t xs, __m512 acc) {
    const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_load_ps(side));
    acc = _mm512_fmadd_ps(scaled, _mm512_mul_ps(_mm512_load_ps(side + 2 * kPanelRows), dx), acc);
    const __m512 mins =
        _mm512_mul_ps(_mm512_load_ps(side + kPanelRows), _mm512_set1_ps(static_cast<float>(xs)));
    return _mm512_fnmadd_ps(mins, _mm512_mul_ps(_mm512_load_ps(side + 3 * kPanelRows), dx), acc);
  }

  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int, uint8_t* codes,
                         float* side) {
    static const B kZero{};
    const B* b[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) {
      b[r] = rows[r] ? reinterpret_cast<const B*>(rows[r]) : &kZero;
    }
    for (int r = 0; r < kPanelRows; ++r) {
      const avx2::K4ScaleBytes s = avx2::k4_scale_bytes(b[r]->scales);
      const float d = avx2::half_to_float(b[r]->d), dmin = avx2::half_to_float(b[r]->dmin);
      for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k) {
        float* at = side + k * kSide * kPanelRows + r;
        at[0] = static_cast<float>((s.scales >> (8 * k)) & 0xff);
        at[kPanelRows] = static_cast<float>((s.mins >> (8 * k)) & 0xff);
        at[2 * kPanelRows] = d;
        at[3 * kPanelRows] = dmin;
      }
    }
    for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k) {
      __m512i a[8];
      for (int i = 0; i < 8; ++i) a[i] = Derived::two_rows(*b[2 * i], *b[2 * i + 1], k);
      store_runs(a, codes + k * kPanelBlockBytes);
    }
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

}  // namespace hearth::cpu::avx512
