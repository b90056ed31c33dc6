// The 32-weight block formats for the row-panel engine (panel_engine.h): Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1 and IQ4_NL, the prompt counterparts of quant_tiles.h's pair tiles and of
// block_formats_32.h, with the same bits. Codes enter vpdpbusd unsigned, u = code + kOffset, and
// a block's sum starts at minus kOffset times the activation quants' sum, which is what the tiles
// take off after their trees. The side data are each block's f16 d (and m) as floats. Include
// only from files compiled with the avx512/ flags.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/quant_blocks.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"
#include "backend/cpu/kernels/avx512/panel_engine.h"

namespace hearth::cpu::avx512 {

// What the 32-weight formats share. Derived gives kOffset and two_rows(a, b): the unsigned codes
// of two rows' blocks, [row a's 32 | row b's 32] in weight order. kMin: B has an f16 m, added as
// xs * (m * dx).
template <typename Derived, typename B, bool kMin>
struct SmallPanelFormat {
  using Block = B;
  static constexpr int kGroupBlocks = static_cast<int>(kActGroupBlocks);
  static constexpr int kSide = kMin ? 2 : 1;  // [d][m], 16 rows each
  static constexpr int kSums = 1;

  static int32_t start(int32_t xs) { return -(xs * Derived::kOffset); }
  // acc + isum * (d * dx) [+ xs * (m * dx)], as quant_tiles.h and SmallBlockFormat round it.
  static __m512 finish(const float* side, const __m512i (&isum)[1], const BlockActs& a,
                       __m512 acc) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[0]), _mm512_mul_ps(_mm512_load_ps(side), a.dx),
                          acc);
    if constexpr (kMin) {
      const __m512 m = _mm512_load_ps(side + kPanelRows);
      acc = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(a.xs)), _mm512_mul_ps(m, a.dx), acc);
    }
    return acc;
  }

  // Blocks past `valid` (a last partial group) and rows past the matrix are zero blocks, as
  // GroupTiles pads them.
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int valid, uint8_t* codes,
                         float* side) {
    static const B kZero{};
    for (int k = 0; k < kGroupBlocks; ++k) {
      const B* at[kPanelRows];
      for (int r = 0; r < kPanelRows; ++r) {
        at[r] = rows[r] && k < valid ? reinterpret_cast<const B*>(rows[r]) + k : &kZero;
      }
      __m512i a[8];
      for (int i = 0; i < 8; ++i) a[i] = Derived::two_rows(*at[2 * i], *at[2 * i + 1]);
      store_runs(a, codes + k * kPanelBlockBytes);
      float* s = side + k * kSide * kPanelRows;
      for (int r = 0; r < kPanelRows; ++r) {
        s[r] = avx2::half_to_float(at[r]->d);
        if constexpr (kMin) s[kPanelRows + r] = avx2::half_to_float(at[r]->m);
      }
    }
  }
};

// Nibbles of two rows' 16 code bytes: low nibbles are weights 0-15, high nibbles 16-31.
inline __m512i nibble_rows(const uint8_t* qa, const uint8_t* qb) {
  const __m256i a =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qa)));
  const __m256i b =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qb)));
  const __m512i shifted =
      _mm512_maskz_srlv_epi64(0xff, join(a, b), _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
}
// Q5's codes: the nibbles, and bit j of each row's 32-bit qh as bit 4 of code j.
template <typename B>
__m512i five_bit_rows(const B& a, const B& b) {
  uint32_t ha, hb;
  std::memcpy(&ha, a.qh, 4);
  std::memcpy(&hb, b.qh, 4);
  const __m512i set =
      _mm512_movm_epi8(static_cast<__mmask64>(ha) | static_cast<__mmask64>(hb) << 32);
  return _mm512_or_si512(nibble_rows(a.qs, b.qs), _mm512_and_si512(set, _mm512_set1_epi8(0x10)));
}
// Signed codes (the IQ4 code book) as offset binary: v + 128.
inline __m512i iq4_rows(__m512i nibbles) {
  const __m512i table = _mm512_maskz_broadcast_i32x4(
      0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm512_xor_si512(_mm512_shuffle_epi8(table, nibbles),
                          _mm512_set1_epi8(static_cast<char>(0x80)));
}

struct PanelQ4_0 : SmallPanelFormat<PanelQ4_0, BlockQ4_0, false> {
  static constexpr int32_t kOffset = 8;
  static __m512i two_rows(const Block& a, const Block& b) { return nibble_rows(a.qs, b.qs); }
};

struct PanelQ8_0 : SmallPanelFormat<PanelQ8_0, BlockQ8_0, false> {
  static constexpr int32_t kOffset = 128;
  // Offset binary: w + 128.
  static __m512i two_rows(const Block& a, const Block& b) {
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    return _mm512_xor_si512(join(qa, qb), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

struct PanelQ4_1 : SmallPanelFormat<PanelQ4_1, BlockQ4_1, true> {
  static constexpr int32_t kOffset = 0;
  static __m512i two_rows(const Block& a, const Block& b) { return nibble_rows(a.qs, b.qs); }
};

struct PanelQ5_0 : SmallPanelFormat<PanelQ5_0, BlockQ5_0, false> {
  static constexpr int32_t kOffset = 16;
  static __m512i two_rows(const Block& a, const Block& b) { return five_bit_rows(a, b); }
};

struct PanelQ5_1 : SmallPanelFormat<PanelQ5_1, BlockQ5_1, true> {
  static constexpr int32_t kOffset = 0;
  static __m512i two_rows(const Block& a, const Block& b) { return five_bit_rows(a, b); }
};

struct PanelIQ4_NL : SmallPanelFormat<PanelIQ4_NL, BlockIQ4_NL, false> {
  static constexpr int32_t kOffset = 128;
  static __m512i two_rows(const Block& a, const Block& b) {
    return iq4_rows(nibble_rows(a.qs, b.qs));
  }
};

}  // namespace hearth::cpu::avx512
