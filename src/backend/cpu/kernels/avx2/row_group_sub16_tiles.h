// The products over row groups of the K-quants with sub-blocks of 16 weights, Q2_K, Q3_K and
// Q6_K (kernels/row_groups.h), with 256-bit vectors, for the AVX2 and the AVX-VNNI tables. Each
// 32-bit lane is a row; a group column is two halves of 8 rows, bytes 0-31 and 32-63 of each code
// vector, both taken at once so that each activation broadcast meets 16 rows. A quad's codes u
// are one byte (Q2_K: the crumb, 0..3; Q3_K: the crumb and the high bit joined at bit 2, 0..7;
// Q6_K: the low nibble and the top two bits joined at bit 4, 0..63) and meet the activation quad
// broadcast; each sub-block's sum meets its scale. Q3_K's and Q6_K's signed scales come with an
// offset (4 or 32), which comes off through the activations' sums of 16 against the scales
// (sub-block pairs, vpmaddwd); Q2_K's unsigned scales come with mins, which meet the same sums in
// a sum of their own. Q2_K's and Q3_K's sums are kept in quarters (kQuarter below). Every sum is
// exact in int32, and a column's result is finished by the reference's FMAs
// (generic/row_groups.cc), so every level gives the same bits.
//
// Dp is the 8-bit product of the level, as in row_group_32_tiles.h. Under MaddAvx2 a Q6_K quad's
// pair sums reach 2 * 63 * 127, so a chain holds two quads (half a sub-block) in int16, Q2_K's
// and Q3_K's a whole sub-block, and meets the scale by vpmaddwd; under VNNI a chain holds a whole
// sub-block in int32 and meets the scale by vpmulld.
//
// Instantiate only with a Dp from the caller's anonymous namespace (see quant_tiles.h). Include
// only from files compiled with AVX2/FMA/F16C.
#pragma once

#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels/row_groups.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_tiles.h"
#include "backend/cpu/kernels/avx2/row_group_columns.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// Quarter: Q2_K's and Q3_K's sums in quarters (kQuarter below), which decode steps take; prompts,
// whose codes are unpacked once per group, take the plain form.
template <typename Dp, typename Group, bool Quarter = !std::is_same_v<Group, GroupQ6_K>>
struct Sub16Tiles {
  static constexpr bool kVnni = requires(__m256i v) { Dp::dot(v, v, v); };
  static constexpr bool kQ6 = std::is_same_v<Group, GroupQ6_K>;
  // Q2_K's scales are unsigned with mins (d sc u - dmin m), the others' signed with an offset.
  static constexpr bool kMins = std::is_same_v<Group, GroupQ2_K>;
  // The codes' offset, 2^kOffsetShift.
  static constexpr int kOffsetShift = kQ6 ? 5 : 2;
  // In quarters, Q2_K's and Q3_K's crumbs are taken where their bytes hold them, at bit 0 or 2
  // (the latter 4 times their value), which saves a shift for half of them, and the even
  // sub-blocks, whose crumbs sit at bit 0, meet 4 times their scale instead. The column's total
  // is then 4 times the reference's, made exact again by a factor 1/4 on its float. Decode steps
  // unpack codes as they go and gain; prompts unpack them once and would pay the scales' extra
  // operation for nothing.
  static constexpr bool kQuarter = Quarter && !kQ6;
  // Quads whose pair sums one int16 chain holds (MaddAvx2): a quad's reach 2 * 28 * 128 in
  // quarters (Q3_K), 2 * 63 * 127 for Q6_K.
  static constexpr int kChainQuads = kQuarter ? 4 : 2;
  static constexpr RowGroupActOffsets kAct = row_group_act_offsets();
  static constexpr int H = 2;  // row halves

  static __m128i load16(const void* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }

  static __m256i load32(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  // The codes u of weights 32 b + 4 w + i (32-block b, quad w) of half h's rows. The 16-bit
  // shifts carry bits across bytes only where the masks drop them.
  static __m256i codes(const Group& g, int b, int w, int h) {
    if constexpr (kQ6) {
      // The low nibble of low[8 m + w] (b = 2 m + e: the high nibble for e = 1) joined with the
      // top bits at bits 2 (e + 2 (w / 4)) of high[4 m + w % 4], moved to bits 4-5.
      const int m = b / 2, e = b % 2, k = 2 * (e + 2 * (w / 4));
      const __m256i v = load32(g.low[8 * m + w] + 32 * h);
      const __m256i hv = load32(g.high[4 * m + w % 4] + 32 * h);
      const __m256i nibble =
          _mm256_and_si256(e == 0 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f));
      return _mm256_or_si256(nibble, _mm256_and_si256(shifted(hv, 4 - k), _mm256_set1_epi8(0x30)));
    } else {
      // Sub-block j = 2 b + w / 4, quad q = w % 4: the crumb at bits 2 (j % 4) of
      // codes[4 (j / 4) + q], taken at bit `at` (in quarters 2 (j % 2), after a shift by 4 for
      // j % 4 >= 2: one shift for both such sub-blocks of a byte; else 0); Q3_K's high bit at bit
      // (j % 4) + 4 (q % 2) of high[2 (j / 4) + q / 2], moved just above the crumb.
      const int j = 2 * b + w / 4, q = w % 4, k = j % 4, at = kQuarter ? 2 * (k % 2) : 0;
      const __m256i v = load32(g.codes[4 * (j / 4) + q] + 32 * h);
      const __m256i crumb =
          _mm256_and_si256(shifted(v, at - 2 * k), _mm256_set1_epi8(static_cast<char>(3 << at)));
      if constexpr (kMins) {
        return crumb;
      } else {
        const __m256i hv = load32(g.high[2 * (j / 4) + q / 2] + 32 * h);
        return _mm256_or_si256(crumb,
                               _mm256_and_si256(shifted(hv, at + 2 - k - 4 * (q % 2)),
                                                _mm256_set1_epi8(static_cast<char>(4 << at))));
      }
    }
  }
  // v shifted left by s bits (right by -s) in 16-bit lanes.
  static __m256i shifted(__m256i v, int s) {
    return s > 0 ? _mm256_slli_epi16(v, s) : s < 0 ? _mm256_srli_epi16(v, -s) : v;
  }

  // Q3_K's and Q6_K's scales of sub-blocks 2b and 2b + 1, 16 rows as int8; with kQuarter the
  // first (even) sub-block's are 4 times the scale (Q3_K's 6-bit u - 32 as 4 u - 128).
  struct ScalePair {
    __m128i first, second;
  };
  static ScalePair scales(const Group& g, int b) {
    if constexpr (kQ6) {
      return {load16(g.scales[2 * b]), load16(g.scales[2 * b + 1])};
    } else {
      // group_q3_k_scale: the low 4 bits of both in scale_low[b] (nibbles), the high 2 at bits
      // 4 (b / 4) and 4 (b / 4) + 2 of scale_high[b % 4].
      const __m128i low = load16(g.scale_low[b]);
      const __m128i high = _mm_srli_epi16(load16(g.scale_high[b % 4]), 4 * (b / 4));
      const __m128i low4 = _mm_set1_epi8(15), top = _mm_set1_epi8(0x30), bias = _mm_set1_epi8(32);
      const __m128i second = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(low, 4), low4),
                                          _mm_and_si128(_mm_slli_epi16(high, 2), top));
      if constexpr (kQuarter) {
        const __m128i first = _mm_or_si128(
            _mm_slli_epi16(_mm_and_si128(low, low4), 2),
            _mm_and_si128(_mm_slli_epi16(high, 6), _mm_set1_epi8(static_cast<char>(0xc0))));
        return {_mm_sub_epi8(first, _mm_set1_epi8(static_cast<char>(128))),
                _mm_sub_epi8(second, bias)};
      }
      const __m128i first =
          _mm_or_si128(_mm_and_si128(low, low4), _mm_and_si128(_mm_slli_epi16(high, 4), top));
      return {_mm_sub_epi8(first, bias), _mm_sub_epi8(second, bias)};
    }
  }

  // The scales of sub-blocks 2b and 2b + 1, as column() takes them. Q2_K's come straight from
  // the group: scales[b][2 r + e] holds row r's byte of sub-block 2b + e (scale in the low
  // nibble, min in the high one), so half h's 16 bytes zero-extended to int16 hold each row's
  // pair in its lane, one widening a half. The others' come from scales(), 16 rows as int8.
  struct BlockScales {
    ScalePair bytes;   // Q3_K, Q6_K
    __m256i pairs[H];  // Q2_K
  };
  [[gnu::always_inline]] static inline BlockScales block_scales(const Group& g, int b) {
    BlockScales bs{};
    if constexpr (kMins) {
      for (int h = 0; h < H; ++h) bs.pairs[h] = _mm256_cvtepu8_epi16(load16(g.scales[b] + 16 * h));
    } else {
      bs.bytes = scales(g, b);
    }
    return bs;
  }

  // Sub-block 2b + s's scale in each row lane of half h: int32 under VNNI, the same int16 in
  // both halves of the lane for vpmaddwd otherwise (Q2_K's even one 4 times in quarters).
  [[gnu::always_inline]] static inline __m256i scale_lanes(const BlockScales& bs, int s, int h) {
    if constexpr (kMins) {
      const __m256i sc = _mm256_and_si256(bs.pairs[h], _mm256_set1_epi16(15));
      const int times = kQuarter && s == 0 ? 2 : 0;
      if constexpr (kVnni) {
        return _mm256_slli_epi32(
            s == 0 ? _mm256_and_si256(sc, _mm256_set1_epi32(0xffff)) : _mm256_srli_epi32(sc, 16),
            times);
      } else {
        // Each lane's int16 s into both halves of the lane.
        const char a = static_cast<char>(2 * s), b = static_cast<char>(2 * s + 1);
        const __m128i pick = _mm_setr_epi8(a, b, a, b, a + 4, b + 4, a + 4, b + 4, a + 8, b + 8,
                                           a + 8, b + 8, a + 12, b + 12, a + 12, b + 12);
        return _mm256_slli_epi16(_mm256_shuffle_epi8(sc, _mm256_broadcastsi128_si256(pick)), times);
      }
    } else {
      const __m128i bytes = s == 0 ? bs.bytes.first : bs.bytes.second;
      if constexpr (kVnni) {
        return _mm256_cvtepi8_epi32(h == 0 ? bytes : _mm_srli_si128(bytes, 8));
      } else {
        return duplicated(bytes, h);
      }
    }
  }

  // (a, b) as int16 in every 32-bit lane, a in the low half.
  static __m256i int16_pairs(int a, int b) {
    return _mm256_set1_epi32(static_cast<int32_t>(
        static_cast<uint16_t>(a) | static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16));
  }

  // Half h's rows of 16 int8 values (one per row), sign-extended: each in both int16 halves of
  // its row's lane (`duplicated`), or paired with the next sub-block's (`paired`).
  static __m256i duplicated(__m128i v, int h) {
    return _mm256_cvtepi8_epi16(h == 0 ? _mm_unpacklo_epi8(v, v) : _mm_unpackhi_epi8(v, v));
  }
  static __m256i paired(__m128i a, __m128i b, int h) {
    return _mm256_cvtepi8_epi16(h == 0 ? _mm_unpacklo_epi8(a, b) : _mm_unpackhi_epi8(a, b));
  }

  // Quads a chain takes before it meets its scale: a whole sub-block under VNNI (int32), else
  // kChainQuads (int16).
  static constexpr int kPartQuads = kVnni ? 4 : kChainQuads;

  // Adds sub-blocks 2b + s0 .. 2b + s0 + N - 1's sums, sum_l u_l x_l times their scales, for
  // tokens xs[0..T) into total[h][t]. codes_of(b, w, h) gives codes().
  template <int T, int N, typename CodesOf>
  [[gnu::always_inline]] static inline void sub_blocks(const BlockScales& bs, int b, int s0,
                                                       const uint8_t* const (&xs)[T],
                                                       __m256i (&total)[H][T],
                                                       const CodesOf& codes_of) {
#pragma GCC unroll 2
    for (int p = 0; p < 4 / kPartQuads; ++p) {
      __m256i chain[N][H][T] = {};
#pragma GCC unroll 4
      for (int q = kPartQuads * p; q < kPartQuads * (p + 1); ++q) {
        __m256i x[N][T];
        for (int n = 0; n < N; ++n) {
          for (int t = 0; t < T; ++t) {
            x[n][t] = broadcast32(xs[t] + kAct.sub16[2 * b + s0 + n] + 4 * q);
          }
        }
        for (int h = 0; h < H; ++h) {
          for (int n = 0; n < N; ++n) {
            const __m256i u = codes_of(b, 4 * (s0 + n) + q, h);
            for (int t = 0; t < T; ++t) {
              if constexpr (kVnni) {
                chain[n][h][t] = Dp::dot(chain[n][h][t], u, x[n][t]);
              } else {
                chain[n][h][t] = _mm256_add_epi16(chain[n][h][t], _mm256_maddubs_epi16(u, x[n][t]));
              }
            }
          }
        }
      }
      for (int n = 0; n < N; ++n) {
        for (int h = 0; h < H; ++h) {
          const __m256i scale = scale_lanes(bs, s0 + n, h);
          for (int t = 0; t < T; ++t) {
            total[h][t] =
                _mm256_add_epi32(total[h][t], kVnni ? _mm256_mullo_epi32(chain[n][h][t], scale)
                                                    : _mm256_madd_epi16(chain[n][h][t], scale));
          }
        }
      }
    }
  }

  // Adds one column's exact integer sums, sum_j s_j sum_l (u_l - 2^kOffsetShift) x_l, for tokens
  // xs[0..T) into total[h][t]. codes_of(b, w, h) gives codes().
  // Q2_K: other[h][t] = sum_j m_j (sum of x) instead of the offset.
  template <int T, typename CodesOf>
  [[gnu::always_inline]] static inline void column(const Group& gc, const uint8_t* const (&xs)[T],
                                                   __m256i (&total)[H][T], __m256i (&other)[H][T],
                                                   const CodesOf& codes_of) {
#pragma GCC unroll 8
    for (int b = 0; b < 8; ++b) {
      const BlockScales bs = block_scales(gc, b);
      // Q2_K's one token takes the pair's sub-blocks side by side, so that the code vector both
      // read (their crumbs share its bytes) is loaded and shifted once instead of held from one
      // to the other, which spilled (1.15x from L2). Elsewhere they go in turn: more tokens keep
      // more chains live, and Q3_K (the same) and Q6_K (slower) did not gain.
      if constexpr (T == 1 && kMins) {
        sub_blocks<T, 2>(bs, b, 0, xs, total, codes_of);
      } else {
        sub_blocks<T, 1>(bs, b, 0, xs, total, codes_of);
        sub_blocks<T, 1>(bs, b, 1, xs, total, codes_of);
      }
      // Against the sums of 16 of sub-blocks 2b and 2b + 1, one vpmaddwd a row half and token:
      // Q2_K's mins into their own sum, the others' offset (2^kOffsetShift s_j) off the total.
      for (int h = 0; h < H; ++h) {
        if constexpr (kMins) {
          add_pair_sums<T>(_mm256_srli_epi16(bs.pairs[h], 4), xs, kAct.pair[b], other[h]);
        } else if constexpr (kQuarter) {
          // In quarters: the first scale is 4 s already, the second s.
          const __m256i offset =
              _mm256_mullo_epi16(paired(bs.bytes.first, bs.bytes.second, h),
                                 int16_pairs(-(1 << kOffsetShift), -(4 << kOffsetShift)));
          add_pair_sums<T>(offset, xs, kAct.pair[b], total[h]);
        } else {
          const __m256i offset = _mm256_sub_epi16(
              _mm256_setzero_si256(),
              _mm256_slli_epi16(paired(bs.bytes.first, bs.bytes.second, h), kOffsetShift));
          add_pair_sums<T>(offset, xs, kAct.pair[b], total[h]);
        }
      }
    }
  }

  // Tokens x[0..T) against one group over nb columns: y[t * ldy + r]. codes_of(c, b, w, h) gives
  // column c's codes(). One token prefetches each column's bytes ahead, as a forward stream.
  template <int T, typename CodesOf>
  static void run(int64_t nb, const Group* g, const uint8_t* x, size_t ldx, float* y, size_t ldy,
                  const CodesOf& codes_of) {
    __m256 sum[H][T] = {}, mins[H][T] = {};
    for (int64_t c = 0; c < nb; ++c) {
      const Group& gc = g[c];
      if constexpr (T == 1) prefetch_column(gc);
      const uint8_t* xs[T];
      for (int t = 0; t < T; ++t) xs[t] = x + t * ldx + c * kActGroupBytes;
      __m256i total[H][T] = {}, other[H][T] = {};
      column<T>(gc, xs, total, other, [&](int b, int w, int h) { return codes_of(c, b, w, h); });
      add_column_term<T, kQuarter>(gc.d, xs, total, sum);
      if constexpr (kMins) add_column_term<T>(gc.dmin, xs, other, mins);
    }
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * ldy + 8 * h,
                         kMins ? _mm256_sub_ps(sum[h][t], mins[h][t]) : sum[h][t]);
      }
    }
  }

  // gemm_row_groups (row_group_columns.h).
  template <int MaxTokens>
  static void gemm(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                   int64_t nt, float* y, size_t ldy) {
    if constexpr (kQuarter) {
      if (unpack_codes(nt)) {
        return Sub16Tiles<Dp, Group, false>::template columns<MaxTokens>(n, w, ldw, ng, x, ldx, nt,
                                                                         y, ldy);
      }
    }
    columns<MaxTokens>(n, w, ldw, ng, x, ldx, nt, y, ldy);
  }

  // Each form's driver stays a function of its own, compiled as it would be alone.
  template <int MaxTokens>
  [[gnu::noinline]] static void columns(int64_t n, const void* w, size_t ldw, int64_t ng,
                                        const void* x, size_t ldx, int64_t nt, float* y,
                                        size_t ldy) {
    gemm_column_codes<Sub16Tiles, Group, MaxTokens>(n, w, ldw, ng, x, ldx, nt, y, ldy);
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
