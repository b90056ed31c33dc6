// The super-block weight formats of the block tile engine (block_tiles.h): Q2_K to Q6_K and
// IQ4_XS, whose 256-weight super-block is exactly one activation group. Each format reads one
// super-block per group; its integer codes, scales and mins are those of block_codes.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_tiles.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

template <typename B>
struct SuperBlockFormat {
  using Block = B;
  static constexpr int kGroupBlocks = 1;
  using Act = ActPair;
  static Act act(const ActPair& a) { return a; }
};

// Two blocks' codes with the int16 scales of their halves (per-16 scales).
struct ScaledPair {
  __m256i lo, hi, sc_lo, sc_hi;
};
// Codes times activations, each int16 pair sum times the scale of its 16 weights (|u . x| of a
// pair stays below 2^15 for codes up to 63).
template <typename Dp>
__m256i scaled_products(const ScaledPair& w, const ActPair& a) {
  return Dp::scaled(_mm256_maddubs_epi16(w.lo, a.lo), w.sc_lo, _mm256_maddubs_epi16(w.hi, a.hi),
                    w.sc_hi);
}

// Two blocks' codes in the activation pair's layout.
struct CodePair {
  __m256i lo, hi;
};

// Q2_K / Q3_K's 2-bit codes (bits 2k of qs[32h + l]) of blocks 2p and 2p + 1, which are codes
// k = 2 (p % 2) and k + 1 of half h = p / 2: all 32 of each block, in weight order.
struct BlockCodes2 {
  __m256i first, second;
};
inline BlockCodes2 crumbs(const uint8_t* qs, int p) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (p / 2)));
  const int shift = 4 * (p % 2);
  const __m256i mask = _mm256_set1_epi8(3);
  return {_mm256_and_si256(_mm256_srli_epi16(q, shift), mask),
          _mm256_and_si256(_mm256_srli_epi16(q, shift + 2), mask)};
}
// Two blocks' codes in weight order, rearranged as the activation pair (lo: the first 16 of
// each, hi: the last 16).
inline CodePair interleave(const BlockCodes2& c) {
  return {_mm256_permute2x128_si256(c.first, c.second, 0x20),
          _mm256_permute2x128_si256(c.first, c.second, 0x31)};
}

// Q4_K / Q5_K: the 6-bit scales and mins of the 8 sub-blocks (k4_scale_min), unpacked four at a
// time in general-purpose registers, one byte each in sub-block order.
struct K4ScaleBytes {
  uint64_t scales, mins;
};
inline K4ScaleBytes k4_scale_bytes(const uint8_t* q) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  return {(a & k6) | static_cast<uint64_t>((c & k4) | ((a >> 6) & k2) << 4) << 32,
          (b & k6) | static_cast<uint64_t>(((c >> 4) & k4) | ((b >> 6) & k2) << 4) << 32};
}
// The same as floats in lane order.
struct K4Scales {
  __m256 scale, min;
};
inline K4Scales k4_lane_scales(const uint8_t* q) {
  const K4ScaleBytes b = k4_scale_bytes(q);
  return {lane_floats(b.scales), lane_floats(b.mins)};
}

// Q4_K / Q5_K after the tree: isum = s * qx, msum = m * (block quant sum).
struct K4Group {
  __m256 scale, min, d, dmin;
  template <typename Block>
  static K4Group make(const Block* b) {
    static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2, "d and dmin side by side");
    const K4Scales s = k4_lane_scales(b->scales);
    // d and dmin from one 32-bit load: [d dmin d dmin ...], then each spread to every lane.
    uint32_t d_dmin;
    std::memcpy(&d_dmin, &b->d, sizeof d_dmin);
    const __m256 both = _mm256_cvtph_ps(_mm_set1_epi32(static_cast<int>(d_dmin)));
    return {s.scale, s.min, _mm256_moveldup_ps(both), _mm256_movehdup_ps(both)};
  }
  // acc + isum * (d * dx) - msum * (dmin * dx), each term rounded once (fnmadd rounds exactly as
  // an fma with the negated factor).
  __m256 finish(__m256i qx, __m256 dx, __m256i xs, __m256 acc) const {
    acc = fma_term(_mm256_mul_ps(_mm256_cvtepi32_ps(qx), scale), d, dx, acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(min, _mm256_cvtepi32_ps(xs)), _mm256_mul_ps(dmin, dx),
                            acc);
  }
};

template <typename Block>
struct K4BlockGroup {
  const Block* b;
  K4Group f;
  static K4BlockGroup make(const uint8_t* w) {
    const auto* b = reinterpret_cast<const Block*>(w);
    return {b, K4Group::make(b)};
  }
};

// What Q4_K and Q5_K share: nibble-sized codes with per-32 scales and mins.
template <typename Dp, typename B>
struct K4Format : SuperBlockFormat<B> {
  using Group = K4BlockGroup<B>;
  using Pair = CodePair;
  using Act = ActPair;
  static Group group(const uint8_t* w) { return Group::make(w); }
  // Both halves' int16 sums stay within 4 * 31 * 127.
  static __m256i products(const Pair& w, const Act& a) {
    return Dp::dot_narrow(w.lo, a.lo, w.hi, a.hi);
  }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i xs, __m256 acc) {
    return g.f.finish(s, dx, xs, acc);
  }
};

template <typename Dp>
struct FormatQ4_K : K4Format<Dp, BlockQ4_K> {
  using Group = K4BlockGroup<BlockQ4_K>;
  // Sub-block 2p is the low nibbles of qs[32p..32p+31], sub-block 2p + 1 the high ones.
  static CodePair pair(const Group& g, int p) {
    return {unpack_nibbles(g.b->qs + 32 * p), unpack_nibbles(g.b->qs + 32 * p + 16)};
  }
};

template <typename Dp>
struct FormatQ5_K : K4Format<Dp, BlockQ5_K> {
  using Group = K4BlockGroup<BlockQ5_K>;
  // Q4_K's nibbles plus bit 2p (sub-block 2p) or 2p + 1 (sub-block 2p + 1) of qh[l] as bit 4.
  static CodePair pair(const Group& g, int p) {
    const BlockQ5_K* b = g.b;
    const auto fifth = [&](int half16) {
      const __m256i bits = two_shifts(b->qh + 16 * half16, 2 * p, 2 * p + 1);
      return _mm256_slli_epi16(_mm256_and_si256(bits, _mm256_set1_epi8(1)), 4);
    };
    return {_mm256_or_si256(unpack_nibbles(b->qs + 32 * p), fifth(0)),
            _mm256_or_si256(unpack_nibbles(b->qs + 32 * p + 16), fifth(1))};
  }
};

// What Q6_K and Q3_K share: codes u in [0, 2C) standing for u - C (Q6_K: C = 32, Q3_K: C = 4),
// with per-16 int8 scales and one f16 d. The tree sums the scaled u . x; C times each scale
// times its 16 activations' sum comes off after it (kSums16), one vpmaddwd per group against
// the row's sums of 16, so each block's sum is the integer the reference's (u - C) . x reaches
// and no token pays for C . x per pair.
template <typename Dp, typename B, int C>
struct OffsetFormat : SuperBlockFormat<B> {
  static constexpr bool kSums16 = true;
  struct Group {
    const B* b;
    __m256i scales;   // int16 (sub16_scales)
    __m256i offsets;  // C times the scales
    __m256 d;
    // The block at w with its 16 scales (int8, sub-block order).
    static Group make(const uint8_t* w, __m128i (*scale_bytes)(const B&)) {
      const auto* b = reinterpret_cast<const B*>(w);
      const __m256i scales = sub16_scales(scale_bytes(*b));
      return {b, scales, offsets_of(scales), broadcast_f16(b->d)};
    }
    // Pair p's codes, with the scales of its halves.
    ScaledPair with_scales(__m256i lo, __m256i hi, int p) const {
      return {lo, hi, scale16(scales, 2 * p), scale16(scales, 2 * p + 1)};
    }
  };
  using Pair = ScaledPair;
  static __m256i offsets_of(__m256i scales) {
    return _mm256_mullo_epi16(scales, _mm256_set1_epi16(C));
  }
  static __m256i products(const Pair& w, const ActPair& a) { return scaled_products<Dp>(w, a); }
  // acc + (s - offsets . s16) * (d * dx): the block sums less C times their scaled sums of 16.
  static __m256 finish_offsets(__m256i offsets, __m256 d, __m256i s, __m256 dx, __m256i s16,
                               __m256 acc) {
    const __m256i less_offset = _mm256_sub_epi32(s, _mm256_madd_epi16(offsets, s16));
    return fma_term(_mm256_cvtepi32_ps(less_offset), d, dx, acc);
  }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i, __m256i s16, __m256 acc) {
    return finish_offsets(g.offsets, g.d, s, dx, s16, acc);
  }
};

template <typename Dp>
struct FormatQ6_K : OffsetFormat<Dp, BlockQ6_K, 32> {
  using Group = typename OffsetFormat<Dp, BlockQ6_K, 32>::Group;
  static __m128i scale_bytes(const BlockQ6_K& b) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  }
  static Group group(const uint8_t* w) { return Group::make(w, scale_bytes); }
  // Pair p: codes k = 2 (p % 2) and k + 1 of half h = p / 2; their low 4 bits are the low
  // (p even) or high nibbles of ql[64h + l] and ql[64h + 32 + l], the top 2 bits at bits 2k and
  // 2k + 2 of qh[32h + l]. Those move to bits 4-5 with one 32-bit shift whose count differs per
  // 128-bit lane (left by 4 and 2 for k = 0, right by 0 and 2 for k = 2); what crosses from a
  // neighbouring byte is masked off.
  static ScaledPair pair(const Group& g, int p) {
    const uint8_t* ql = g.b->ql + 64 * (p / 2);
    const uint8_t* qh = g.b->qh + 32 * (p / 2);
    const bool odd = p % 2 != 0;
    const __m256i left = _mm256_setr_epi32(4, 4, 4, 4, 2, 2, 2, 2);
    const __m256i right = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2);
    const auto codes = [&](int half16) {
      const __m256i q = load_halves(ql + 16 * half16, ql + 32 + 16 * half16);
      const __m256i low = low_nibbles(odd ? _mm256_srli_epi16(q, 4) : q);
      const __m256i h = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16 * half16)));
      const __m256i top = odd ? _mm256_srlv_epi32(h, right) : _mm256_sllv_epi32(h, left);
      return _mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
    };
    return g.with_scales(codes(0), codes(1), p);
  }
};

template <typename Dp>
struct FormatQ3_K : OffsetFormat<Dp, BlockQ3_K, 4> {
  using Group = typename OffsetFormat<Dp, BlockQ3_K, 4>::Group;
  // The 16 6-bit scales (q3k_scale) minus 32, unpacked four at a time.
  static __m128i scale_bytes(const BlockQ3_K& b) {
    uint32_t lo, mid, hi;
    std::memcpy(&lo, b.scales, 4);
    std::memcpy(&mid, b.scales + 4, 4);
    std::memcpy(&hi, b.scales + 8, 4);
    constexpr uint32_t k4 = 0x0f0f0f0f, k2 = 0x03030303;
    const __m128i sc = _mm_setr_epi32(static_cast<int>((lo & k4) | (hi & k2) << 4),
                                      static_cast<int>((mid & k4) | ((hi >> 2) & k2) << 4),
                                      static_cast<int>(((lo >> 4) & k4) | ((hi >> 4) & k2) << 4),
                                      static_cast<int>(((mid >> 4) & k4) | ((hi >> 6) & k2) << 4));
    return _mm_sub_epi8(sc, _mm_set1_epi8(32));
  }
  static Group group(const uint8_t* w) { return Group::make(w, scale_bytes); }
  // Codes q2 | hbit << 2 in [0, 8), standing for the signed code + 4; hbit is bit 2p (block 2p)
  // or 2p + 1 of hmask[l], moved to bit 2.
  static ScaledPair pair(const Group& g, int p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.b->hmask));
    const auto hbit = [&](int j) {
      const __m256i at2 = j >= 2 ? _mm256_srli_epi16(h, j - 2) : _mm256_slli_epi16(h, 2 - j);
      return _mm256_and_si256(at2, _mm256_set1_epi8(4));
    };
    BlockCodes2 c = crumbs(g.b->qs, p);
    c.first = _mm256_or_si256(c.first, hbit(2 * p));
    c.second = _mm256_or_si256(c.second, hbit(2 * p + 1));
    const CodePair codes = interleave(c);
    return g.with_scales(codes.lo, codes.hi, p);
  }
};

// Q2_K: 2-bit codes with a 4-bit scale and a 4-bit min per 16 weights. The codes' products go
// through the tree, each 16 weights' sum scaled per pair; the minimum term of a block is its two
// mins times the activations' sums of 16 (act_layout.h), one vpmaddwd per group after the tree
// (kSums16), so each block's msum is the same integer a second tree of m . (1 . x) would reach.
template <typename Dp>
struct FormatQ2_K : SuperBlockFormat<BlockQ2_K> {
  static constexpr bool kSums16 = true;
  struct Group {
    const BlockQ2_K* b;
    __m256i scales;
    __m256i mins;  // int16, in the order of the sums of 16 (sub16_unsigned)
    __m256 d, neg_dmin;
  };
  using Pair = ScaledPair;
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(w);
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    return {b, sub16_scales(_mm_and_si128(sm, low4)),
            sub16_unsigned(_mm_and_si128(_mm_srli_epi16(sm, 4), low4)), broadcast_f16(b->d),
            _mm256_set1_ps(-half_to_float(b->dmin))};
  }
  static ScaledPair pair(const Group& g, int p) {
    const CodePair codes = interleave(crumbs(g.b->qs, p));
    return {codes.lo, codes.hi, scale16(g.scales, 2 * p), scale16(g.scales, 2 * p + 1)};
  }
  static __m256i products(const ScaledPair& w, const Act& a) { return scaled_products<Dp>(w, a); }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i, __m256i s16, __m256 acc) {
    acc = fma_term(_mm256_cvtepi32_ps(s), g.d, dx, acc);
    return fma_term(_mm256_cvtepi32_ps(_mm256_madd_epi16(g.mins, s16)), g.neg_dmin, dx, acc);
  }
};

template <typename Dp>
struct FormatIQ4_XS : SuperBlockFormat<BlockIQ4_XS> {
  struct Group {
    const BlockIQ4_XS* b;
    __m256 scale, d;
  };
  using Pair = CodePair;
  // Sub-block i's scale: bits 4i of scales_l (as one 32-bit word) and bits 2i of scales_h,
  // minus 32; shifted per lane so they come out in lane order.
  static Group group(const uint8_t* w) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(w);
    uint32_t low;
    std::memcpy(&low, b->scales_l, 4);
    const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i l4 = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(low)), _mm256_slli_epi32(order, 2)),
        _mm256_set1_epi32(15));
    const __m256i h2 = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_slli_epi32(order, 1)),
        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_or_si256(l4, _mm256_slli_epi32(h2, 4));
    return {b, _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32))),
            broadcast_f16(b->d)};
  }
  // Sub-blocks 2p and 2p + 1 are qs[32p..32p+31]: low nibbles the first 16 weights of each.
  static Pair pair(const Group& g, int p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.b->qs + 32 * p));
    return {iq4_values(low_nibbles(v)), iq4_values(high_nibbles(v))};
  }
  static __m256i products(const Pair& w, const Act& a) {
    return signed_products<Dp>(w.lo, w.hi, a);
  }
  static __m256 finish(const Group& g, __m256i s, __m256 dx, __m256i, __m256 acc) {
    return fma_term(_mm256_mul_ps(_mm256_cvtepi32_ps(s), g.scale), g.d, dx, acc);
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
