// The super-block formats that take the 512-bit engine (wide_block_tiles.h): each extends its
// 256-bit format (avx2/block_formats_256.h), whose group() and finish() it keeps where it can, with
// the wide steps. (Shuffles and broadcasts take their masked forms, all lanes set: GCC 12's
// unmasked ones trip -Wuninitialized.) Every integer a wide format reaches is the one its 256-bit
// format reaches, so the outputs are the same bits. Instantiate only with formats of an anonymous
// namespace (see avx2/quant_tiles.h). Include only from files compiled with the avx512/ flags.
#pragma once

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx512/wide_block_tiles.h"

namespace hearth::cpu::avx512 {

// Q4_K: the nibbles of two pairs from one 64-byte load (nibble_quad), against plain activations.
template <typename Base>
struct WideFormatQ4_K : Base {
  static __m512i quad_sums(const typename Base::Group& g, int q, const PlainQuadAct& a) {
    return plain_quad_sums(nibble_quad(g.b->qs + 64 * q), a);
  }
};

// 16-bit lane counts as a 512-bit vector: c0 in 128-bit lanes 0 and 2, c1 in lanes 1 and 3.
inline __m512i lane_counts(int64_t c0, int64_t c1) {
  constexpr int64_t kEvery16 = 0x0001000100010001;
  return _mm512_set_epi64(c1 * kEvery16, c1 * kEvery16, c0 * kEvery16, c0 * kEvery16, c1 * kEvery16,
                          c1 * kEvery16, c0 * kEvery16, c0 * kEvery16);
}

// 32 bytes at p as 128-bit quarters 0, 0, 1, 1: each byte beside the two blocks of a pair.
inline __m512i quarters_0011(const uint8_t* p) {
  const __m512i first =
      _mm512_maskz_broadcast_i32x4(0x00ff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_mask_broadcast_i32x4(first, 0xff00,
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
}

// A | (B & C), as a vpternlog immediate.
inline constexpr int kOrMasked = 0xf8;

// Q5_K: Q4_K's nibbles plus a fifth bit from qh[l]: bit 2p of qh[l] for block 2p's weight l, bit
// 2p + 1 for block 2p + 1's. Pair 2q's blocks are 4q and 4q + 1, pair 2q + 1's 4q + 2 and 4q + 3:
// per 128-bit lane (blocks 2p, 2p + 1, 2p, 2p + 1) the bit moves to bit 4 by a 16-bit shift of at
// most 4, whose spill into the neighbouring byte never reaches its bit 4.
template <typename Base>
struct WideFormatQ5_K : Base {
  static __m512i quad_sums(const typename Base::Group& g, int q, const PlainQuadAct& a) {
    QuadCodes c = nibble_quad(g.b->qs + 64 * q);
    const __m512i qh = quarters_0011(g.b->qh);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    // Bits 0, 1 (pair 0), 2, 3 (pair 1) go left; 4, 5 (pair 2), 6, 7 (pair 3) right.
    const __m512i first = q == 0 ? _mm512_sllv_epi16(qh, lane_counts(4, 3))
                                 : _mm512_srlv_epi16(qh, lane_counts(0, 1));
    const __m512i second = q == 0 ? _mm512_sllv_epi16(qh, lane_counts(2, 1))
                                  : _mm512_srlv_epi16(qh, lane_counts(2, 3));
    c.first = _mm512_ternarylogic_epi32(c.first, first, bit4, kOrMasked);
    c.second = _mm512_ternarylogic_epi32(c.second, second, bit4, kOrMasked);
    return plain_quad_sums(c, a);
  }
};

// IQ4_XS: sub-block i's 32 nibbles are qs[16i, 16i + 16) (low nibbles its first 16 weights), so a
// pair is 32 bytes: [low nibbles | high nibbles] is its activation order. The code book is looked
// up offset by 128 (unsigned, for vpdpbusd), and 128 times each block's activation sum comes off
// before the 256-bit format's finish.
template <typename Base>
struct WideFormatIQ4_XS : Base {
  static __m512i quad_sums(const typename Base::Group& g, int q, const PlainQuadAct& a) {
    const __m512i v = _mm512_loadu_si512(g.b->qs + 64 * q);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const __m512i book = iq4_offset_book();
    const __m512i low = _mm512_shuffle_epi8(book, _mm512_and_si512(v, nibble));
    const __m512i high =
        _mm512_shuffle_epi8(book, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    return plain_quad_sums({_mm512_maskz_shuffle_i64x2(0xff, low, high, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_maskz_shuffle_i64x2(0xff, low, high, _MM_SHUFFLE(3, 2, 3, 2))},
                           a);
  }
  static __m256 finish(const typename Base::Group& g, __m256i s, __m256 dx, __m256i xs,
                       __m256 acc) {
    return finish_less_offset<Base, 7>(g, s, dx, xs, acc);
  }
};

// Q6_K and Q3_K: codes u standing for u - C, an int8 scale per 16 weights and one f16 d (Base:
// the 256-bit OffsetFormat, whose offsets and finish this one takes: C times each scale's
// activation sum of 16 comes off after the tree). Codes::quad(b, q) gives the unsigned codes of
// pairs 2q and 2q + 1 in the activation pairs' order (128-bit quarters: block 2p's first 16 codes,
// block 2p + 1's, then their last 16), so each 128-bit lane of a pair's product covers one scale's
// 16 weights. The two forms below differ in where the scales enter; both reach the 256-bit format's
// integers.
template <typename Base>
struct WideScale16Group : Base {
  struct Group {
    const typename Base::Block* b;
    __m512i scales;   // the 16 scales as int32 in the tree's order (tree_order)
    __m256i offsets;  // Base's: C times the scales, in the order of the sums of 16
    __m256 d;
  };
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const typename Base::Block*>(w);
    const __m128i bytes = Base::scale_bytes(*b);
    return {b, _mm512_cvtepi8_epi32(tree_order(bytes)), Base::offsets_of(avx2::sub16_scales(bytes)),
            avx2::broadcast_f16(b->d)};
  }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i, __m256i s16, __m256 acc) {
    return Base::finish_offsets(g.offsets, g.d, s, dx, s16, acc);
  }
};

// Scales per pair, as the 256-bit format applies them: each int16 pair sum of maddubs times the
// scale of its 16 weights (Q6_K: with the scales after the tree instead, it read faster from L2
// but more slowly from DRAM, docs/benchmarks.md).
template <typename Base, typename Codes>
struct WideScale16Pairs : WideScale16Group<Base> {
  using Group = typename WideScale16Group<Base>::Group;
  // Pair p of the group: codes times activations, each int16 pair times the scale of its 16
  // weights (int16 element 2p of every 128-bit lane of g.scales, the low half of int32 element
  // p).
  static __m512i pair_sums(const Group& g, int p, __m512i codes, __m512i x) {
    const int lo = 4 * (p % 4);
    const __m512i pick = _mm512_set1_epi16(static_cast<int16_t>(lo | (lo + 1) << 8));
    const __m512i sc = _mm512_shuffle_epi8(g.scales, pick);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(codes, x), sc);
  }

  static __m512i quad_sums(const Group& g, int q, const PlainQuadAct& a) {
    const QuadCodes c = Codes::quad(*g.b, q);
    return pair_add(pair_sums(g, 2 * q, c.first, a.first),
                    pair_sums(g, 2 * q + 1, c.second, a.second));
  }
};

// Scales after the tree: plain vpdpbusd products, so the tree's 16 sums are those of u . x per
// 16 weights, and one vpmulld per group and token multiplies each by its scale.
template <typename Base, typename Codes>
struct WideScale16Tree : WideScale16Group<Base> {
  using Group = typename WideScale16Group<Base>::Group;
  static __m512i scale_sums(const Group& g, __m512i s) { return _mm512_mullo_epi32(s, g.scales); }
  static __m512i quad_sums(const Group& g, int q, const PlainQuadAct& a) {
    return plain_quad_sums(Codes::quad(*g.b, q), a);
  }
};

// Q6_K's codes: the low and the high nibbles of ql[64q, 64q + 64) (in 16-byte quarters 0, 2, 1,
// 3: block 2p's first 16 codes, block 2p + 1's, then their last 16) and bits 0-1, 2-3 (pair 2q)
// or 4-5, 6-7 (pair 2q + 1) of qh[32q, 32q + 32) as bits 4-5 (quarters 0, 0, 1, 1 of it).
struct WideCodesQ6_K {
  static QuadCodes quad(const BlockQ6_K& b, int q) {
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * q);
    const __m512i low = _mm512_maskz_shuffle_i64x2(0xff, ql, ql, _MM_SHUFFLE(3, 1, 2, 0));
    const __m512i high = quarters_0011(b.qh + 32 * q);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    // Bits 2k, 2k + 1 of qh to bits 4-5 of each byte: by 16-bit shifts, per 128-bit lane 4, 2,
    // 4, 2 to the left (pair 2q: k = 0, 1) or 0, 2, 0, 2 to the right (pair 2q + 1: k = 2, 3);
    // what crosses from the neighbouring byte is masked off.
    return {
        _mm512_ternarylogic_epi32(_mm512_and_si512(low, nibble),
                                  _mm512_sllv_epi16(high, lane_counts(4, 2)), bits45, kOrMasked),
        _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(low, 4), nibble),
                                  _mm512_srlv_epi16(high, lane_counts(0, 2)), bits45, kOrMasked)};
  }
};

// The 2-bit codes of Q2_K and Q3_K: sub-block 4q + j takes bits 2j of qs[32q + l] (pair 2q: j =
// 0, 1; pair 2q + 1: j = 2, 3). The 32-byte run enters as quarters 0, 0, 1, 1, each 128-bit lane
// shifted by its block's count; 16-bit shifts of at most 6 leave the bits kept inside their byte.
inline QuadCodes crumb_quad(const uint8_t* qs, int q) {
  const __m512i crumbs = quarters_0011(qs + 32 * q);
  const __m512i three = _mm512_set1_epi8(3);
  return {_mm512_and_si512(_mm512_srlv_epi16(crumbs, lane_counts(0, 2)), three),
          _mm512_and_si512(_mm512_srlv_epi16(crumbs, lane_counts(4, 6)), three)};
}

// Q3_K's codes: the crumbs, and bit 4q + j of hmask[l] as bit 2 (hmask entering as quarters 0, 0,
// 1, 1, shifted left by at most 2 or right by at most 5).
struct WideCodesQ3_K {
  static QuadCodes quad(const BlockQ3_K& b, int q) {
    const QuadCodes low = crumb_quad(b.qs, q);
    const __m512i hmask = quarters_0011(b.hmask);
    const __m512i bit2 = _mm512_set1_epi8(4);
    // Bit k = 4q + j of hmask to bit 2: left by 2 - k, or right by k - 2.
    const __m512i high_first = q == 0 ? _mm512_sllv_epi16(hmask, lane_counts(2, 1))
                                      : _mm512_srlv_epi16(hmask, lane_counts(2, 3));
    const __m512i high_second = q == 0 ? _mm512_srlv_epi16(hmask, lane_counts(0, 1))
                                       : _mm512_srlv_epi16(hmask, lane_counts(4, 5));
    return {_mm512_ternarylogic_epi32(low.first, high_first, bit2, kOrMasked),
            _mm512_ternarylogic_epi32(low.second, high_second, bit2, kOrMasked)};
  }
};

// Q2_K: 2-bit codes with a 4-bit scale and a 4-bit min per 16 weights (Base: the 256-bit
// FormatQ2_K, whose minimum term and finish this one keeps). One tree from the codes, scaled after
// the tree as WideScale16Tree does.
template <typename Base>
struct WideFormatQ2_K : Base {
  struct Group {
    const BlockQ2_K* b;
    __m512i scales;  // int32, in the tree's order (tree_order)
    __m256i mins;    // int16, in the order of the sums of 16 (avx2::sub16_unsigned)
    __m256 d, neg_dmin;
  };
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(w);
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    return {b, _mm512_cvtepu8_epi32(tree_order(_mm_and_si128(sm, low4))),
            avx2::sub16_unsigned(_mm_and_si128(_mm_srli_epi16(sm, 4), low4)),
            avx2::broadcast_f16(b->d), _mm256_set1_ps(-avx2::half_to_float(b->dmin))};
  }
  static __m512i scale_sums(const Group& g, __m512i s) { return _mm512_mullo_epi32(s, g.scales); }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i, __m256i s16, __m256 acc) {
    acc = avx2::fma_term(_mm256_cvtepi32_ps(s), g.d, dx, acc);
    return avx2::fma_term(_mm256_cvtepi32_ps(_mm256_madd_epi16(g.mins, s16)), g.neg_dmin, dx, acc);
  }
  static __m512i quad_sums(const Group& g, int q, const PlainQuadAct& a) {
    return plain_quad_sums(crumb_quad(g.b->qs, q), a);
  }
};

template <typename Base>
using WideFormatQ6_K = WideScale16Pairs<Base, WideCodesQ6_K>;
template <typename Base>
using WideFormatQ3_K = WideScale16Tree<Base, WideCodesQ3_K>;

}  // namespace hearth::cpu::avx512
