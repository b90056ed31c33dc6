// The 32-weight block types (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) in the 512-bit tile engine of
// wide_block_tiles.h, for one token and few tokens: one zmm vpdpbusd meets a whole activation pair
// (the 64 bytes act_layout.h stores for blocks 2p and 2p + 1: x_lo, then x_hi), where the 256-bit
// engines (avx2/quant_tiles.h, avx2/block_tiles.h) take two products, two 16-byte loads and an
// insert per pair, a hadd tree of ymm, and pack the blocks' f16 factors in general-purpose
// registers.
//
// A pair's codes come from one 64-byte load and one word permute (vpermw: every block size and
// field offset of these types is even) that places [qs of 2p | qs of 2p + 1] in both 256-bit
// halves; the blocks' f16 factors come from the same loads by a two-source permute. The low half
// keeps the low nibbles (the first 16 weights), the high half the high nibbles, left in place by
// formats that can: 16 times the code, which is exact, and shifted back once per group after the
// tree (kHighShift). The zmm product holds, per 128-bit lane: block 2p's partial sums
// against the first 16 weights, block 2p + 1's, then the same two against the last 16. Two levels
// of pair_add over a group's four pairs leave lanes [first halves of blocks 0, 2, 4, 6 | of 1, 3,
// 5, 7 | second halves of 0, 2, 4, 6 | of 1, 3, 5, 7]: the two 256-bit halves added give each
// block's exact integer sum in act_layout.h's lane order, the integers the 256-bit engines reach,
// finished by the same float steps, so every output is identical to the AVX2 kernels'.
//
// Include only from files compiled with the avx512/ flags; instantiate only with formats of an
// anonymous namespace (see avx2/quant_tiles.h).
#pragma once

#include <cstddef>

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats_32.h"
#include "backend/cpu/kernels/avx512/wide_block_tiles.h"

namespace hearth::cpu::avx512 {

// The code bytes of pair p of a group of 8 blocks B, as [qs of 2p | qs of 2p + 1] twice. The
// load starts at the pair, or for the last pairs 64 bytes before the group's end, so that it
// never reads past the group (GroupTiles pads a partial last group to whole blocks).
template <typename B>
struct PairGather {
  static constexpr int kBlock = static_cast<int>(sizeof(B));
  static constexpr int kGroupBytes = 8 * kBlock;
  static_assert(kBlock % 2 == 0 && offsetof(B, qs) % 2 == 0, "word permutes");
  static_assert(offsetof(B, qs) + kBlock + 16 <= 64 && kGroupBytes >= 64, "a pair in one load");

  static constexpr int start(int p) {
    return 2 * p * kBlock < kGroupBytes - 64 ? 2 * p * kBlock : kGroupBytes - 64;
  }
  // Where the word at byte `offset` of block 2p + i (i = 0, 1) sits in pair p's load.
  static constexpr int word(int p, int i, size_t offset) {
    return ((2 * p + i) * kBlock + static_cast<int>(offset) - start(p)) / 2;
  }
  // Four words from w on, as one 64-bit element of a vpermw index.
  static constexpr int64_t words(int w) {
    return w | int64_t{w + 1} << 16 | int64_t{w + 2} << 32 | int64_t{w + 3} << 48;
  }
  static __m512i index(int p) {
    const int a = word(p, 0, offsetof(B, qs)), b = word(p, 1, offsetof(B, qs));
    return _mm512_set_epi64(words(b + 4), words(b), words(a + 4), words(a), words(b + 4), words(b),
                            words(a + 4), words(a));
  }
  static __m512i load(const B* group, int p) {
    return _mm512_loadu_si512(reinterpret_cast<const uint8_t*>(group) + start(p));
  }
  static __m512i codes(const B* group, int p) {
    return _mm512_permutexvar_epi16(index(p), load(group, p));
  }

  // Where block k's f16 at byte `offset` is read: in the loads of pairs 0 and 2 (`first`) where
  // they hold it, else in those of pairs 1 and 3 (`held` tells whether they do); `word` indexes
  // the two loads as one 64-word table (the second load from word 32).
  struct Spot {
    bool first, held;
    int word;
  };
  static constexpr Spot spot(int k, size_t offset) {
    const int at = k * kBlock + static_cast<int>(offset);
    const int p = k < 4 ? 0 : 2, base = k < 4 ? 0 : 32;
    if (at - start(p) + 2 <= 64) return {true, true, base + (at - start(p)) / 2};
    const int rel = at - start(p + 1);
    return {false, rel >= 0 && rel + 2 <= 64, base + rel / 2};
  }
  // The block in lane `lane` of act_layout.h's order (blocks 0, 2, 4, 6, 1, 3, 5, 7).
  static constexpr int lane_block(int lane) { return lane < 4 ? 2 * lane : 2 * (lane - 4) + 1; }
  // Lanes 4h..4h + 3 of one permute's index.
  static constexpr int64_t field_index(size_t offset, bool first, int h) {
    int64_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const Spot s = spot(lane_block(4 * h + i), offset);
      if (s.first == first) v |= int64_t{s.word} << (16 * i);
    }
    return v;
  }
  static constexpr bool all_held(size_t offset) {
    for (int k = 0; k < 8; ++k) {
      if (!spot(k, offset).held) return false;
    }
    return true;
  }
  static constexpr __mmask32 second_lanes(size_t offset) {
    __mmask32 m = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if (!spot(lane_block(lane), offset).first) m |= 1u << lane;
    }
    return m;
  }
  // The f16 field at byte `offset` of each of the 8 blocks as floats in lane order: a
  // two-source word permute of the loads of pairs 0 and 2, and where blocks are too long for
  // those to hold all 8, a second one of the loads of pairs 1 and 3 for the rest.
  template <size_t offset>
  static __m256 field(const B* group) {
    static_assert(start(1) == 2 * kBlock && start(2) == 4 * kBlock, "pairs 1 and 2 unclamped");
    static_assert(all_held(offset));
    const __m512i first = _mm512_set_epi64(0, 0, 0, 0, 0, 0, field_index(offset, true, 1),
                                           field_index(offset, true, 0));
    __m512i h = _mm512_permutex2var_epi16(load(group, 0), first, load(group, 2));
    if constexpr (second_lanes(offset) != 0) {
      const __m512i second = _mm512_set_epi64(0, 0, 0, 0, 0, 0, field_index(offset, false, 1),
                                              field_index(offset, false, 0));
      h = _mm512_mask_mov_epi16(h, second_lanes(offset),
                                _mm512_permutex2var_epi16(load(group, 1), second, load(group, 3)));
    }
    return _mm256_cvtph_ps(_mm512_castsi512_si128(h));
  }
};

// The low nibbles in the low half, the high ones, in place (16 times the code), in the high half.
inline __m512i nibbles_in_place(__m512i v) {
  constexpr int64_t kLow = 0x0f0f0f0f0f0f0f0f;
  const __m512i mask = _mm512_set_epi64(~kLow, ~kLow, ~kLow, ~kLow, kLow, kLow, kLow, kLow);
  return _mm512_and_si512(v, mask);
}
// The low nibbles in the low half, the high ones shifted down in the high half.
inline __m512i nibbles_shifted(__m512i v) {
  const __m512i counts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004,
                                          0x0004000400040004, 0x0004000400040004, 0, 0, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi16(v, counts), _mm512_set1_epi8(0x0f));
}

// The wide step of WideBlockEngine for a format F with codes(g, p) (pair p's unsigned codes as
// described above): one vpdpbusd per pair against plain activations.
template <typename F>
struct PairQuads {
  template <typename Group>
  static __m512i quad_sums(const Group& g, int q, const PlainQuadAct& a) {
    return plain_quad_sums({F::codes(g, 2 * q), F::codes(g, 2 * q + 1)}, a);
  }
};
// Q4_0: nibbles u = q + 8 against the activations, 8 times each block's activation sum taken off
// after the tree, then isum * (d * dx) as avx2::QuantEngine finishes.
struct WideQ4_0 : PairQuads<WideQ4_0> {
  using Block = BlockQ4_0;
  static constexpr int kGroupBlocks = static_cast<int>(kActGroupBlocks);
  static constexpr int kTrees = 1;
  struct Group {
    const Block* b;
    __m256 d;
  };
  static constexpr int kHighShift = 4;
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const Block*>(w);
    return {b, PairGather<Block>::template field<offsetof(Block, d)>(b)};
  }
  static __m512i codes(const Group& g, int p) {
    return nibbles_in_place(PairGather<Block>::codes(g.b, p));
  }
  static __m256 finish(const Group& g, const __m256i (&s)[1], __m256 dx, __m256i xs, __m256 acc) {
    const __m256i isum = _mm256_sub_epi32(s[0], _mm256_slli_epi32(xs, 3));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(g.d, dx), acc);
  }
};

// A 256-bit format's group (its blocks, d and m as floats in lane order), gathered by permutes.
template <typename Base>
typename Base::Group wide_group(const uint8_t* w) {
  using B = typename Base::Block;
  using G = PairGather<B>;
  const auto* b = reinterpret_cast<const B*>(w);
  if constexpr (requires { &B::m; }) {
    return {b, G::template field<offsetof(B, d)>(b), G::template field<offsetof(B, m)>(b)};
  } else {
    return {b, G::template field<offsetof(B, d)>(b), _mm256_setzero_ps()};
  }
}

// Q4_1: the nibbles as Q4_0's; its 256-bit format's finish (d and the min term).
template <typename Base>
struct WideQ4_1 : Base, PairQuads<WideQ4_1<Base>> {
  static constexpr int kHighShift = 4;
  static typename Base::Group group(const uint8_t* w) { return wide_group<Base>(w); }
  static __m512i codes(const typename Base::Group& g, int p) {
    return nibbles_in_place(PairGather<typename Base::Block>::codes(g.b, p));
  }
};

// IQ4_NL: the code book looked up offset by 128 (unsigned, for vpdpbusd), and 128 times each
// block's activation sum taken off before the 256-bit format's finish.
template <typename Base>
struct WideIQ4_NL : Base, PairQuads<WideIQ4_NL<Base>> {
  static typename Base::Group group(const uint8_t* w) { return wide_group<Base>(w); }
  static __m512i codes(const typename Base::Group& g, int p) {
    return _mm512_shuffle_epi8(iq4_offset_book(),
                               nibbles_shifted(PairGather<typename Base::Block>::codes(g.b, p)));
  }
  static __m256 finish(const typename Base::Group& g, const __m256i (&s)[1], __m256 dx, __m256i xs,
                       __m256 acc) {
    return finish_less_offset<Base, 7>(g, s, dx, xs, acc);
  }
};

// Q5_0 and Q5_1: the nibbles shifted down, and bit j of a block's qh (little-endian) as the
// fifth bit (0x10) of weight j: qh's first word fills 128-bit lane 0 (block 2p) or 1 (block
// 2p + 1), its second word lane 2 or 3; each lane's bytes 0-7 take the word's low byte and bytes
// 8-15 its high byte, and byte j of the lane tests bit j % 8. Base (FormatQ5_0, FormatQ5_1)
// gives the finish: Q5_0's takes 16 times the activation sums off, as its codes stand for q - 16.
template <typename Base>
struct WideQ5 : Base, PairQuads<WideQ5<Base>> {
  using B = typename Base::Block;
  using G = PairGather<B>;
  static typename Base::Group group(const uint8_t* w) { return wide_group<Base>(w); }
  static __m512i codes(const typename Base::Group& g, int p) {
    const __m512i v = G::load(g.b, p);
    const __m512i nibbles = nibbles_shifted(_mm512_permutexvar_epi16(G::index(p), v));
    const int64_t a = G::word(p, 0, offsetof(B, qh)), b = G::word(p, 1, offsetof(B, qh));
    constexpr int64_t kEvery16 = 0x0001000100010001;
    const __m512i pick = _mm512_set_epi64((b + 1) * kEvery16, (b + 1) * kEvery16,
                                          (a + 1) * kEvery16, (a + 1) * kEvery16, b * kEvery16,
                                          b * kEvery16, a * kEvery16, a * kEvery16);
    const __m512i halves = _mm512_set_epi64(0x0101010101010101, 0, 0x0101010101010101, 0,
                                            0x0101010101010101, 0, 0x0101010101010101, 0);
    const __m512i spread = _mm512_shuffle_epi8(_mm512_permutexvar_epi16(pick, v), halves);
    const __mmask64 fifth =
        _mm512_test_epi8_mask(spread, _mm512_set1_epi64(static_cast<int64_t>(0x8040201008040201)));
    return _mm512_mask_add_epi8(nibbles, fifth, nibbles, _mm512_set1_epi8(0x10));
  }
};

}  // namespace hearth::cpu::avx512
