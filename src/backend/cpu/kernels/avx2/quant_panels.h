// The 32-weight block formats for the row-panel engine (panel_engine.h): Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1 and IQ4_NL, the prompt counterparts of quant_tiles.h's pair tiles and of
// block_formats_32.h, with the same bits. Codes enter the products unsigned, u = code + kOffset,
// and a block's sum starts at minus kOffset times the activation quants' sum, which is what the
// tiles take off after their trees. The side data are each block's f16 d (and m) as floats.
// Include only from files compiled with the avx2/ flags or more.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/quant_blocks.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"
#include "backend/cpu/kernels/avx2/panel_engine.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// What the 32-weight formats share. Derived gives kOffset, kMaxCode and row(b), the unsigned
// codes of one row's block in weight order (NibbleCodes and FiveBitCodes below for most). kMin: B
// has an f16 m, added as xs * (m * dx).
template <typename Derived, typename B, bool kMin>
struct SmallPanelFormat {
  using Block = B;
  static constexpr int kGroupBlocks = static_cast<int>(kActGroupBlocks);
  static constexpr int kSide = kMin ? 2 : 1;  // [d][m], 16 rows each
  static constexpr int kSums = 1;

  static int32_t start(int32_t xs) { return -(xs * Derived::kOffset); }
  // acc + isum * (d * dx) [+ xs * (m * dx)], as quant_tiles.h and SmallBlockFormat round it.
  template <typename V>
  static typename V::F finish(const float* side, const typename V::I (&isum)[1],
                              const BlockActs<V>& a, typename V::F acc) {
    acc = V::fmadd(V::to_float(isum[0]), V::mul(V::load(side), a.dx), acc);
    if constexpr (kMin) {
      const typename V::F m = V::load(side + kPanelRows);
      acc = V::fmadd(V::set1(static_cast<float>(a.xs)), V::mul(m, a.dx), acc);
    }
    return acc;
  }

  // Blocks past `valid` (a last partial group) and rows past the matrix are zero blocks, as
  // GroupTiles pads them.
  template <typename V>
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int valid, uint8_t* codes,
                         float* side) {
    static const B kZero{};
    for (int k = 0; k < kGroupBlocks; ++k) {
      const B* at[kPanelRows];
      for (int r = 0; r < kPanelRows; ++r) {
        at[r] = rows[r] && k < valid ? reinterpret_cast<const B*>(rows[r]) + k : &kZero;
      }
      __m256i c[kPanelRows];
      for (int r = 0; r < kPanelRows; ++r) c[r] = Derived::row(*at[r]);
      V::store_runs(c, codes + k * kPanelBlockBytes);
      float* s = side + k * kSide * kPanelRows;
      for (int r = 0; r < kPanelRows; ++r) {
        s[r] = half_to_float(at[r]->d);
        if constexpr (kMin) s[kPanelRows + r] = half_to_float(at[r]->m);
      }
    }
  }
};

// Q5's codes: the nibbles, and bit j of the 32-bit qh as bit 4 of code j.
template <typename B>
__m256i five_bit_row(const B& b) {
  uint32_t h;
  std::memcpy(&h, b.qh, 4);
  // Byte j of h's bytes spread to bytes 8 (j / 8)..: then each byte's own bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int32_t>(h)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}
// Signed codes (the IQ4 code book) as offset binary: v + 128.
inline __m256i iq4_row(__m256i nibbles) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm256_xor_si256(_mm256_shuffle_epi8(table, nibbles),
                          _mm256_set1_epi8(static_cast<char>(0x80)));
}

// The codes of the nibble types (u = nibble) and of the 5-bit ones (the nibbles and a bit of qh).
struct NibbleCodes {
  static constexpr int kMaxCode = 15;
  template <typename B>
  static __m256i row(const B& b) {
    return unpack_nibbles(b.qs);
  }
};
struct FiveBitCodes {
  static constexpr int kMaxCode = 31;
  template <typename B>
  static __m256i row(const B& b) {
    return five_bit_row(b);
  }
};

struct PanelQ4_0 : SmallPanelFormat<PanelQ4_0, BlockQ4_0, false>, NibbleCodes {
  static constexpr int32_t kOffset = 8;
};

struct PanelQ4_1 : SmallPanelFormat<PanelQ4_1, BlockQ4_1, true>, NibbleCodes {
  static constexpr int32_t kOffset = 0;
};

struct PanelQ5_0 : SmallPanelFormat<PanelQ5_0, BlockQ5_0, false>, FiveBitCodes {
  static constexpr int32_t kOffset = 16;
};

struct PanelQ5_1 : SmallPanelFormat<PanelQ5_1, BlockQ5_1, true>, FiveBitCodes {
  static constexpr int32_t kOffset = 0;
};

struct PanelQ8_0 : SmallPanelFormat<PanelQ8_0, BlockQ8_0, false> {
  static constexpr int32_t kOffset = 128;
  static constexpr int kMaxCode = 255;
  // Offset binary: w + 128.
  static __m256i row(const Block& b) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

struct PanelIQ4_NL : SmallPanelFormat<PanelIQ4_NL, BlockIQ4_NL, false> {
  static constexpr int32_t kOffset = 128;
  static constexpr int kMaxCode = 255;
  static __m256i row(const Block& b) { return iq4_row(unpack_nibbles(b.qs)); }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
