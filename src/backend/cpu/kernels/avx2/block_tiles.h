// The tile engine of the block weight types (core/quant_blocks.h) against Q8 activation rows: the
// Q8_0/Q4_0 engine of quant_tiles.h generalized to integer scales, mins and 256-weight
// super-blocks. Include only from files compiled with AVX2/FMA/F16C (avx2/, avxvnni/, avx512/).
//
// A group is 8 blocks of 32 weights: one activation group (act_layout.h), one K-quant or IQ4_XS
// super-block, or 8 legacy blocks. Per pair p of a group, a weight format F gives int8 codes in
// the activation pair's layout (lo: first 16 codes of blocks 2p and 2p + 1, hi: the last 16) and
// turns them, against one token's pair, into int32 partial sums with block 2p in lanes 0-3 and
// block 2p + 1 in lanes 4-7, each half already multiplied by its integer scale where the scales
// are per 16 weights. The hadd tree of quant_tiles.h then leaves each block's exact integer sum
// (block_codes.h's isum) in lane order, and F::finish applies the float factors with one FMA per
// term, in the reference's order: isum * (D * dx), then msum * (M * dx).
//
// Terms per 16 weights that multiply the activations' sums (Q2_K's minimum term, the offset of
// Q6_K's and Q3_K's codes) come after the tree from the activation row's sums of 16 (F::kSums16:
// one vpmaddwd per group, ActSide and finish_group below).
// Per-32 scales are applied after the tree as floats: |isum| < 2^24 for every such type (Q8
// quants are at most 127 in magnitude), so float(qx) * s is exactly float(s * qx).
//
// F is a template over Dp, the 8-bit product instructions of an ISA (MaddAvx2 below, or VNNI's
// in avx512/), and is instantiated only with Dp types from an anonymous namespace, so every
// instantiation stays private to its translation unit (see quant_tiles.h).
#pragma once

#include "backend/cpu/kernels/act_layout.h"
#include "core/quant_blocks.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/group_tiles.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

inline constexpr int kGroupPairs = static_cast<int>(kActGroupBlocks / 2);

// One token's activation pair: the 32-byte loads x_lo and x_hi.
struct ActPair {
  __m256i lo, hi;
};

// AVX2's 8-bit products: maddubs to int16 pairs, madd to int32.
struct MaddAvx2 {
  // u0 . s0 + u1 . s1 in 4-product int32 lanes, where both maddubs sums together fit in int16.
  static __m256i dot_narrow(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
    const __m256i sum16 = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
    return _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
  }
  // The same where only each maddubs alone fits: each is widened before the add.
  static __m256i dot_wide(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u0, s0), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u1, s1), ones));
  }
  // int16 pair sums p0, p1 times int16 scales c0, c1, widened and added.
  static __m256i scaled(__m256i p0, __m256i c0, __m256i p1, __m256i c1) {
    return _mm256_add_epi32(_mm256_madd_epi16(p0, c0), _mm256_madd_epi16(p1, c1));
  }
};

// --- Helpers shared by the formats ---------------------------------------------------------

// The 16 bytes at p in both 128-bit lanes, shifted right by s0 in the low lane and s1 in the
// high one (one 64-bit shift per lane: the caller masks off what moved in from the neighbouring
// byte).
inline __m256i two_shifts(const uint8_t* p, int s0, int s1) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_srlv_epi64(v, _mm256_setr_epi64x(s0, s0, s1, s1));
}

inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
inline __m256i high_nibbles(__m256i v) { return low_nibbles(_mm256_srli_epi16(v, 4)); }

inline __m256i load_halves(const uint8_t* first, const uint8_t* second) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(second),
                             reinterpret_cast<const __m128i*>(first));
}

// Signed codes w against activations x: maddubs needs an unsigned operand, so |w| meets
// x * sign(w). Pair sums reach 2 * 127 * 127, so lo and hi are widened separately.
template <typename Dp>
__m256i signed_products(__m256i w_lo, __m256i w_hi, const ActPair& a) {
  return Dp::dot_wide(_mm256_sign_epi8(w_lo, w_lo), _mm256_sign_epi8(a.lo, w_lo),
                      _mm256_sign_epi8(w_hi, w_hi), _mm256_sign_epi8(a.hi, w_hi));
}

// The IQ4 code book as a 16-entry byte table in both lanes.
inline __m256i iq4_values(__m256i nibbles) {
  const __m256i table = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm256_shuffle_epi8(table, nibbles);
}

// 16 per-16 values (bytes, sub-block order) arranged for scale16: the low lane holds sub-blocks
// 0 1 4 5 8 9 12 13 as int16, the high lane 2 3 6 7 10 11 14 15, so pair p finds the values of
// its halves at lane elements 2p (lo) and 2p + 1 (hi) without crossing lanes. It is also the
// order of the activations' sums of 16 (act_layout.h), so one vpmaddwd against those sums leaves
// each block's sum of its two 16-weight terms in the block's lane. Signed, or unsigned.
inline __m128i per16_order(__m128i bytes) {
  return _mm_shuffle_epi8(bytes,
                          _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
}
inline __m256i sub16_scales(__m128i bytes) { return _mm256_cvtepi8_epi16(per16_order(bytes)); }
inline __m256i sub16_unsigned(__m128i bytes) { return _mm256_cvtepu8_epi16(per16_order(bytes)); }
// Element i of each lane of sub16_scales' vector, in all 8 int16 of its lane.
inline __m256i scale16(__m256i scales, int i) {
  return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * i)));
}

// 8 bytes (one per block of the group, in block order) as floats in lane order.
inline __m256 lane_floats(uint64_t bytes) {
  const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i v = _mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(bytes)), order);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
}

// An f16 field of each of 8 consecutive blocks, as floats in lane order.
template <typename Block>
__m256 lane_f16(const Block* b, uint16_t Block::*field) {
  uint64_t even = 0, odd = 0;
  for (int k = 0; k < 4; ++k) {
    even |= static_cast<uint64_t>(b[2 * k].*field) << (16 * k);
    odd |= static_cast<uint64_t>(b[2 * k + 1].*field) << (16 * k);
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(odd), static_cast<int64_t>(even)));
}

inline __m256 broadcast_f16(uint16_t h) { return _mm256_set1_ps(half_to_float(h)); }

// acc + float(isum) * (d * dx).
inline __m256 fma_term(__m256 isum, __m256 d, __m256 dx, __m256 acc) {
  return _mm256_fmadd_ps(isum, _mm256_mul_ps(d, dx), acc);
}

// What a group's finish reads of one token's activation group besides the integer sums: the
// blocks' scales and quant sums, and in the Q8K rows of the super-block formats (kGroupBlocks 1)
// the sums of 16 that their quant sums are stored as (act_layout.h), which the terms per 16
// weights take (F::kSums16).
struct ActSide {
  __m256 dx;
  __m256i xs, s16;
  template <typename F>
  [[gnu::always_inline]] static inline ActSide load(const uint8_t* x) {
    ActSide a;
    a.dx = _mm256_loadu_ps(reinterpret_cast<const float*>(x + kActScalesOffset));
    const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kActSumsOffset));
    if constexpr (F::kGroupBlocks == 1) {
      a.s16 = sums;
      a.xs = _mm256_madd_epi16(sums, _mm256_set1_epi16(1));
    } else {
      a.xs = sums;
    }
    return a;
  }
};

template <typename F>
[[gnu::always_inline]] inline __m256 finish_group(const typename F::Group& g, __m256i s,
                                                  const ActSide& a, __m256 acc) {
  if constexpr (requires { F::kSums16; }) {
    return F::finish(g, s, a.dx, a.xs, a.s16, acc);
  } else {
    return F::finish(g, s, a.dx, a.xs, acc);
  }
}

// --- The engine ----------------------------------------------------------------------------

// The block engine for GroupTiles: a group is F::kGroupBlocks blocks of F::Block (8, or 1 for a
// super-block).
template <typename F>
struct BlockEngine {
  using Block = typename F::Block;
  static constexpr int kGroupBlocks = F::kGroupBlocks;

  // One group: R weight rows (pointers to the group's first byte) and T activation groups.
  template <int R, int T>
  static void accumulate(const uint8_t* const (&w)[R], const uint8_t* const (&x)[T],
                         __m256 (&acc)[R][T]) {
    // The trees of pair_tree_add (group_tiles.h), one per row and token.
    __m256i pending[R][T], half[R][T], sums[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) pending[r][t] = half[r][t] = sums[r][t] = _mm256_setzero_si256();
    }
    typename F::Group g[R];
    for (int r = 0; r < R; ++r) g[r] = F::group(w[r]);
    // Unrolled, so that every shift count and shuffle control of a pair is a constant (GCC does
    // not unroll it by itself in the larger tiles).
#pragma GCC unroll 4
    for (int p = 0; p < kGroupPairs; ++p) {
      // The tokens' pairs first, then one row's weights at a time: a prepared pair (up to 6
      // vectors) stays live only while it meets the T tokens.
      typename F::Act a[T];
      for (int t = 0; t < T; ++t) {
        const auto* xq = reinterpret_cast<const __m256i*>(x[t] + 64 * p);
        a[t] = F::act({_mm256_loadu_si256(xq), _mm256_loadu_si256(xq + 1)});
      }
      for (int r = 0; r < R; ++r) {
        const typename F::Pair wp = F::pair(g[r], p);
        for (int t = 0; t < T; ++t) {
          pair_tree_add(p, F::products(wp, a[t]), pending[r][t], half[r][t], sums[r][t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const ActSide side = ActSide::load<F>(x[t]);
      for (int r = 0; r < R; ++r) acc[r][t] = finish_group<F>(g[r], sums[r][t], side, acc[r][t]);
    }
  }
};
template <typename F>
using BlockTiles = GroupTiles<BlockEngine<F>>;

// dot, gemm and gemm_gather of a block format, with the tile shapes of Q4_0's engine
// (quant_tiles.h).
template <typename F>
void set_block_tile_kernels(WeightKernels& k) {
  using Tiles = BlockTiles<F>;
  set_tile_kernels<Tiles, gemm_by_tokens<Tiles, 4, 2, 4>>(k);
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
