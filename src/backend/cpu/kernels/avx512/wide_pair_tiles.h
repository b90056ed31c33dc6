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
  // Where word t (0..31) of a gathered table comes from: the f16 or 16-bit word at byte `offset`
  // of block `block`, or nothing (block -1).
  struct Source {
    int block = -1;
    size_t offset = 0;
  };
  // The index of one two-source permute for the table Map::source(t): the words its loads
  // (`first`: those of pairs 0 and 2, else of pairs 1 and 3) hold.
  template <typename Map>
  static constexpr int64_t table_index(bool first, int quad) {
    int64_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const Source src = Map::source(4 * quad + i);
      if (src.block < 0) continue;
      const Spot s = spot(src.block, src.offset);
      if (s.first == first) v |= int64_t{s.word} << (16 * i);
    }
    return v;
  }
  template <typename Map>
  static constexpr bool table_held() {
    for (int t = 0; t < 32; ++t) {
      const Source src = Map::source(t);
      if (src.block >= 0 && !spot(src.block, src.offset).held) return false;
    }
    return true;
  }
  template <typename Map>
  static constexpr __mmask32 table_second() {
    __mmask32 m = 0;
    for (int t = 0; t < 32; ++t) {
      const Source src = Map::source(t);
      if (src.block >= 0 && !spot(src.block, src.offset).first) m |= 1u << t;
    }
    return m;
  }
  template <typename Map, bool kFirst>
  static __m512i table_indices() {
    return _mm512_set_epi64(table_index<Map>(kFirst, 7), table_index<Map>(kFirst, 6),
                            table_index<Map>(kFirst, 5), table_index<Map>(kFirst, 4),
                            table_index<Map>(kFirst, 3), table_index<Map>(kFirst, 2),
                            table_index<Map>(kFirst, 1), table_index<Map>(kFirst, 0));
  }
  // The table Map::source(t) as 32 words: a two-source word permute of the loads of pairs 0 and
  // 2, and where blocks are too long for those to hold every word, a second one of the loads of
  // pairs 1 and 3 for the rest. Words without a source are unspecified.
  template <typename Map>
  static __m512i table(const B* group) {
    static_assert(start(1) == 2 * kBlock && start(2) == 4 * kBlock, "pairs 1 and 2 unclamped");
    static_assert(table_held<Map>());
    __m512i h =
        _mm512_permutex2var_epi16(load(group, 0), table_indices<Map, true>(), load(group, 2));
    if constexpr (table_second<Map>() != 0) {
      h = _mm512_mask_mov_epi16(
          h, table_second<Map>(),
          _mm512_permutex2var_epi16(load(group, 1), table_indices<Map, false>(), load(group, 3)));
    }
    return h;
  }
  // The f16 fields at byte offsets `offsets` of each of the 8 blocks, in lane order: field i in
  // words 8i to 8i + 7.
  template <size_t... offsets>
  struct FieldMap {
    static constexpr Source source(int t) {
      constexpr size_t at[] = {offsets...};
      return t < 8 * static_cast<int>(sizeof...(offsets)) ? Source{lane_block(t % 8), at[t / 8]}
                                                          : Source{};
    }
  };
  // The field at byte `offset` as floats in lane order.
  template <size_t offset>
  static __m256 field(const B* group) {
    return _mm256_cvtph_ps(_mm512_castsi512_si128(table<FieldMap<offset>>(group)));
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
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i xs, __m256 acc) {
    const __m256i isum = _mm256_sub_epi32(s, _mm256_slli_epi32(xs, 3));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(g.d, dx), acc);
  }
};

// A 256-bit format's group (its blocks, d and m as floats in lane order), gathered by permutes:
// with m, one table of both (d in words 0-7, m in words 8-15).
template <typename Base>
typename Base::Group wide_group(const uint8_t* w) {
  using B = typename Base::Block;
  using G = PairGather<B>;
  const auto* b = reinterpret_cast<const B*>(w);
  if constexpr (requires { &B::m; }) {
    const __m512i h =
        G::template table<typename G::template FieldMap<offsetof(B, d), offsetof(B, m)>>(b);
    return {b, _mm256_cvtph_ps(_mm512_castsi512_si128(h)),
            _mm256_cvtph_ps(_mm512_extracti32x4_epi32(h, 1))};
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
  static __m256 finish(const typename Base::Group& g, __m256i s, __m256 dx, __m256i xs,
                       __m256 acc) {
    return finish_less_offset<Base, 7>(g, s, dx, xs, acc);
  }
};

// Q5_0 and Q5_1: the nibbles shifted down, and bit j of a block's qh (little-endian) as the
// fifth bit (0x10) of weight j. Per group one table (PairGather::table, the permutes that gather
// the blocks' f16 factors) holds every block's qh words and factors: 128-bit lane L has, in words
// 0-3, qh word L / 2 of blocks L % 2, L % 2 + 2, + 4, + 6; in words 4-7, lanes 0 and 1 hold the
// blocks' d and lanes 2 and 3 their m (Q5_1), in act_layout.h's lane order across the two lanes.
// A pair's 128-bit lane L (block 2p + L % 2; its first 16 weights for L < 2, its last 16 above)
// then needs word p of the table's lane L, which one in-lane byte shuffle spreads (bytes 0-7 its
// low byte, 8-15 its high byte) for a byte test of bit j % 8: the pair takes no cross-lane
// permute for its fifth bits. Base (FormatQ5_0, FormatQ5_1) gives the finish: Q5_0's takes 16
// times the activation sums off, as its codes stand for q - 16.
template <typename Base>
struct WideQ5 : Base, PairQuads<WideQ5<Base>> {
  using B = typename Base::Block;
  using G = PairGather<B>;
  static constexpr bool kHasMin = requires { &B::m; };
  struct Group : Base::Group {
    __m512i header;
  };
  struct HeaderMap {
    static constexpr typename G::Source source(int t) {
      const int lane = t / 8, word = t % 8;
      if (word < 4)
        return {2 * word + lane % 2, offsetof(B, qh) + 2 * static_cast<size_t>(lane / 2)};
      if (lane < 2) return {2 * (word - 4) + lane, offsetof(B, d)};
      if constexpr (kHasMin) return {2 * (word - 4) + lane - 2, offsetof(B, m)};
      return {};
    }
  };
  // Words 4-7 of lanes 2 half and 2 half + 1 (qwords 1 and 3 of that 256-bit half) as floats.
  static __m256 factors(__m512i header, int half) {
    const __m256i h =
        half == 0 ? _mm512_castsi512_si256(header) : _mm512_extracti64x4_epi64(header, 1);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(h, 0x0d)));
  }
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const B*>(w);
    const __m512i header = G::template table<HeaderMap>(b);
    const __m256 m = kHasMin ? factors(header, 1) : _mm256_setzero_ps();
    return {{b, factors(header, 0), m}, header};
  }
  static __m512i codes(const Group& g, int p) {
    const __m512i nibbles = nibbles_shifted(G::codes(g.b, p));
    // Bytes 0-7 of every lane from byte 2p (word p's low byte), 8-15 from byte 2p + 1.
    constexpr int64_t kEvery8 = 0x0101010101010101;
    const int64_t lo = kEvery8 * (2 * p), hi = kEvery8 * (2 * p + 1);
    const __m512i spread =
        _mm512_shuffle_epi8(g.header, _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo));
    const __mmask64 fifth =
        _mm512_test_epi8_mask(spread, _mm512_set1_epi64(static_cast<int64_t>(0x8040201008040201)));
    return _mm512_mask_add_epi8(nibbles, fifth, nibbles, _mm512_set1_epi8(0x10));
  }
};

}  // namespace hearth::cpu::avx512
