// The 32-weight block formats of the block tile engine (block_tiles.h): Q4_1, Q5_0, Q5_1 and
// IQ4_NL, 8 blocks per group, each with its own f16 factors. Their integer codes are those of
// block_codes.h; a block's scale is 1 and its min, where it has one, 1 times the block's
// activation quant sum, which the activation row stores.
#pragma once

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_tiles.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

struct BlockPair {
  __m256i lo, hi;
};

// Per group: the 8 blocks and their f16 d (and m) as floats in lane order. By default the codes
// are unsigned and small enough for dot_narrow, and the block has no offset.
template <typename Dp, typename B, bool kMin>
struct SmallBlockFormat {
  using Block = B;
  static constexpr int kGroupBlocks = static_cast<int>(kActGroupBlocks);
  using Act = ActPair;
  using Pair = BlockPair;
  static Act act(const ActPair& a) { return a; }
  struct Group {
    const B* b;
    __m256 d, m;
  };
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const B*>(w);
    if constexpr (kMin) {
      return {b, lane_f16(b, &B::d), lane_f16(b, &B::m)};
    } else {
      return {b, lane_f16(b, &B::d), _mm256_setzero_ps()};
    }
  }
  // Both halves' int16 sums stay within 4 * 31 * 127.
  static __m256i products(const Pair& w, const Act& a) {
    return Dp::dot_narrow(w.lo, a.lo, w.hi, a.hi);
  }
  // acc + isum * (d * dx) [+ xs * (m * dx)].
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i xs, __m256 acc) {
    acc = fma_term(_mm256_cvtepi32_ps(s), g.d, dx, acc);
    if constexpr (kMin) acc = fma_term(_mm256_cvtepi32_ps(xs), g.m, dx, acc);
    return acc;
  }
};

// The nibbles of blocks 2p and 2p + 1, laid out as the activation pair.
template <typename B>
BlockPair pair_nibbles(const B* b, int p) {
  const __m256i v = load_halves(b[2 * p].qs, b[2 * p + 1].qs);
  return {low_nibbles(v), high_nibbles(v)};
}

// Bit j of a block's qh (little-endian) is the fifth bit of weight j: the pair's qh words spread
// to one byte per weight (0 or 0x10), for the first 16 weights (half16 = 0) or the last 16.
inline __m256i fifth_bits(uint32_t qh0, uint32_t qh1, int half16) {
  const __m256i words = _mm256_setr_epi32(static_cast<int>(qh0), 0, 0, 0, static_cast<int>(qh1), 0, 0, 0);
  const int8_t b0 = static_cast<int8_t>(2 * half16), b1 = static_cast<int8_t>(2 * half16 + 1);
  const __m256i pick = _mm256_setr_epi8(b0, b0, b0, b0, b0, b0, b0, b0, b1, b1, b1, b1, b1, b1,
                                        b1, b1, b0, b0, b0, b0, b0, b0, b0, b0, b1, b1, b1, b1,
                                        b1, b1, b1, b1);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i spread = _mm256_and_si256(_mm256_shuffle_epi8(words, pick), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(spread, bit), _mm256_set1_epi8(0x10));
}
template <typename B>
BlockPair pair_codes5(const B* b, int p) {
  BlockPair n = pair_nibbles(b, p);
  uint32_t qh0, qh1;
  std::memcpy(&qh0, b[2 * p].qh, 4);
  std::memcpy(&qh1, b[2 * p + 1].qh, 4);
  return {_mm256_or_si256(n.lo, fifth_bits(qh0, qh1, 0)),
          _mm256_or_si256(n.hi, fifth_bits(qh0, qh1, 1))};
}

template <typename Dp>
struct FormatQ4_1 : SmallBlockFormat<Dp, BlockQ4_1, true> {
  using Group = typename SmallBlockFormat<Dp, BlockQ4_1, true>::Group;
  static BlockPair pair(const Group& g, int p) { return pair_nibbles(g.b, p); }
};

template <typename Dp>
struct FormatQ5_1 : SmallBlockFormat<Dp, BlockQ5_1, true> {
  using Group = typename SmallBlockFormat<Dp, BlockQ5_1, true>::Group;
  static BlockPair pair(const Group& g, int p) { return pair_codes5(g.b, p); }
};

// Q5_0's codes q - 16 are taken as q, and 16 times the block quant sum subtracted, as Q4_0 does
// with 8.
template <typename Dp>
struct FormatQ5_0 : SmallBlockFormat<Dp, BlockQ5_0, false> {
  using Base = SmallBlockFormat<Dp, BlockQ5_0, false>;
  using Group = typename Base::Group;
  static BlockPair pair(const Group& g, int p) { return pair_codes5(g.b, p); }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i xs, __m256 acc) {
    return Base::finish(g, _mm256_sub_epi32(s, _mm256_slli_epi32(xs, 4)), dx, xs, acc);
  }
};

template <typename Dp>
struct FormatIQ4_NL : SmallBlockFormat<Dp, BlockIQ4_NL, false> {
  using Group = typename SmallBlockFormat<Dp, BlockIQ4_NL, false>::Group;
  static BlockPair pair(const Group& g, int p) {
    const BlockPair n = pair_nibbles(g.b, p);
    return {iq4_values(n.lo), iq4_values(n.hi)};
  }
  static __m256i products(const BlockPair& w, const ActPair& a) {
    return signed_products<Dp>(w.lo, w.hi, a);
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
