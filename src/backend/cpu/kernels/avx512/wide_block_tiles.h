// A 512-bit form of the block tile engine (avx2/block_tiles.h) for formats whose codes unpack
// more cheaply 64 bytes at a time (the super-blocks of wide_block_formats.h, the 32-weight blocks
// of wide_pair_tiles.h): one zmm vpdpbusd meets a whole activation pair (x_lo and x_hi side by
// side, the 64 bytes act_layout.h stores for it), so a group takes four 8-bit products instead
// of eight, and a nibble format unpacks two pairs from one load.
//
// A pair's zmm product holds, per 128-bit lane: block 2p's partial sums against x_lo, block
// 2p + 1's against x_lo, then the same two against x_hi. Two levels of a 512-bit pairwise add
// (the lanes of vphaddd, which has no 512-bit form) over a group's four pairs, then the sum of
// the two 256-bit halves, leave each block's exact integer sum in act_layout.h's lane order: the
// same integers the 256-bit engine reaches, finished by the same F::finish, so every output is
// identical to the AVX2 kernels'.
//
// F is a 256-bit format (block_formats_256.h, block_formats_32.h, or a Q4_0 one) that also gives
// the wide steps described at WideBlockEngine. Include only from files compiled with the avx512/
// flags.
#pragma once

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_tiles.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {

// Two pairs' codes: `first` against the activation bytes [128q, 128q + 64) of the group,
// `second` against [128q + 64, 128q + 128).
struct QuadCodes {
  __m512i first, second;
};

// Per 128-bit lane [a0 + a1, a2 + a3, b0 + b1, b2 + b3]: vphaddd's lanes, four times.
inline __m512i pair_add(__m512i a, __m512i b) {
  const __m512 fa = _mm512_castsi512_ps(a);
  const __m512 fb = _mm512_castsi512_ps(b);
  const __m512i even = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0)));
  const __m512i odd = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_epi32(even, odd);
}

// Nibble codes of a 64-byte run holding pairs 2q and 2q + 1 as Q4_K stores them: for each pair,
// 32 bytes whose low nibbles are block 2p's 32 codes and whose high nibbles are block 2p + 1's.
// The activation pair wants [first 16 of 2p | first 16 of 2p + 1 | last 16 of 2p | last 16 of
// 2p + 1], so the 64-bit quarters of the low and high nibbles are interleaved.
inline QuadCodes nibble_quad(const uint8_t* qs) {
  const __m512i v = _mm512_loadu_si512(qs);
  const __m512i mask = _mm512_set1_epi8(0x0f);
  const __m512i low = _mm512_and_si512(v, mask);
  const __m512i high = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  return {_mm512_permutex2var_epi64(low, first, high),
          _mm512_permutex2var_epi64(low, second, high)};
}

// One token's activation pairs 2q and 2q + 1 as two zmm loads.
struct PlainQuadAct {
  __m512i first, second;
  static PlainQuadAct load(const uint8_t* x) {
    return {_mm512_loadu_si512(x), _mm512_loadu_si512(x + 64)};
  }
};

// Unsigned codes against plain activations: vpdpbusd per pair, then pair_add.
inline __m512i plain_quad_sums(const QuadCodes& c, const PlainQuadAct& a) {
  const __m512i zero = _mm512_setzero_si512();
  return pair_add(_mm512_dpbusd_epi32(zero, c.first, a.first),
                  _mm512_dpbusd_epi32(zero, c.second, a.second));
}

// 16 bytes, one per 16 weights of a super-block in sub-block order, in the order of a tree's 16
// sums (128-bit lane j, element i: pair i's lane j), which holds sub-blocks 4i, 4i + 2, 4i + 1,
// 4i + 3 in lanes 0 to 3.
inline __m128i tree_order(__m128i per16) {
  return _mm_shuffle_epi8(per16,
                          _mm_setr_epi8(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15));
}

// Base::finish after 2^Shift times each block's activation sum comes off the integer sums: the
// offset of codes stored as u = q + 2^Shift (IQ4's offset code book).
template <typename Base, int Shift>
__m256 finish_less_offset(const typename Base::Group& g, __m256i s, __m256 dx, __m256i xs,
                          __m256 acc) {
  return Base::finish(g, _mm256_sub_epi32(s, _mm256_slli_epi32(xs, Shift)), dx, xs, acc);
}

// The engine for avx2::GroupTiles, as avx2::BlockEngine but with zmm products. Besides F's
// group() and finish(), a wide format gives
//   quad_sums(g, q, a): pair_add of the two pairs' int32 products (each a pair's partial sums
//            in the lanes described above) against one token's 128 activation bytes of pairs
//            2q and 2q + 1 (PlainQuadAct, loaded once per token and shared by the tile's rows);
//   kHighShift, optionally: the x_hi sums come 2^kHighShift times too large (codes left in the
//            high nibble, an exact factor) and are shifted back before the halves are added;
//   scale_sums(g, s), optionally: the tree's 16 sums (one per 16 weights: 128-bit lane j holds
//            pair i's lane j in element i) times their integer scales, before the halves are
//            added.
template <typename F>
struct WideBlockEngine {
  using Block = typename F::Block;
  static constexpr int kGroupBlocks = F::kGroupBlocks;

  // Inlined into the tile loop: as a call, each group would pass the accumulators through
  // memory (and GCC leaves it out of line at this size).
  template <int R, int T>
  [[gnu::always_inline]] static inline void accumulate(const uint8_t* const (&w)[R],
                                                       const uint8_t* const (&x)[T],
                                                       __m256 (&acc)[R][T]) {
    typename F::Group g[R];
    for (int r = 0; r < R; ++r) g[r] = F::group(w[r]);
    // The sums of pairs 0 and 1, then pair_add'ed with those of pairs 2 and 3 as they come: one
    // vector per row and token stays live, so the tiles of several tokens keep everything in the
    // 32 registers.
    __m512i sums[R][T];
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      PlainQuadAct a[T];
      for (int t = 0; t < T; ++t) a[t] = PlainQuadAct::load(x[t] + 128 * q);
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) {
          const __m512i v = F::quad_sums(g[r], q, a[t]);
          sums[r][t] = q == 0 ? v : pair_add(sums[r][t], v);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const avx2::ActSide side = avx2::ActSide::load<F>(x[t]);
      for (int r = 0; r < R; ++r) {
        __m512i s = sums[r][t];
        if constexpr (requires { F::scale_sums(g[r], s); }) s = F::scale_sums(g[r], s);
        // (The masked extracts: GCC 12's unmasked ones trip -Wuninitialized.)
        __m256i high = _mm512_maskz_extracti32x8_epi32(0xff, s, 1);
        if constexpr (requires { F::kHighShift; }) high = _mm256_srai_epi32(high, F::kHighShift);
        const __m256i blocks = _mm256_add_epi32(_mm512_maskz_extracti32x8_epi32(0xff, s, 0), high);
        acc[r][t] = avx2::finish_group<F>(g[r], blocks, side, acc[r][t]);
      }
    }
  }
};
template <typename F>
using WideBlockTiles = avx2::GroupTiles<WideBlockEngine<F>>;

}  // namespace hearth::cpu::avx512
