// The products over row groups of the K-quant types with sub-blocks of 32 weights, Q4_K, Q5_K
// and IQ4_XS (kernels/row_groups.h), with 256-bit vectors, for the AVX2 and the AVX-VNNI tables.
// Each 32-bit lane is a row; a group column is two halves of 8 rows, both taken at once so that
// each activation broadcast meets 16 rows. A quad's codes (Q4_K's nibble; Q5_K's with its fifth
// bit joined at bit 4; IQ4_XS's looked up in its table) meet the activation quad broadcast; each
// sub-block's sum meets its scale in int32, and a column's sums are finished by the reference's
// FMAs (generic/row_groups.cc), so every level gives the same bits.
//
// Dp is the 8-bit product of the level, as in row_group_32_tiles.h. Under MaddAvx2 Q5_K's codes
// (0..31, Q4_K's 0..15) sum in int16 chains of four quads (2 * 4 * 31 * 127) that meet the scale by
// vpmaddwd, and IQ4_XS's table values meet the activations signed (|t| against x sign(t)), each
// quad's int16 pairs meeting the signed scale by vpmaddwd at once. Under VNNI a sub-block's int32
// chain meets its scale by vpmulld, IQ4_XS's codes taken as the table plus 128 and the 128s taken
// off through the scales against the activations' sums of 16.
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

// Q4_K's (and Q5_K's) scales and mins of sub-blocks 2p (index 0) and 2p + 1 of one group column,
// a byte per row (group_q4_k_scale_min), 16 rows a vector. The 16-bit shifts carry bits across
// bytes only where the masks drop them.
struct ScaleMinBytes {
  __m128i scale[2], min[2];
};
template <typename Group>
ScaleMinBytes q4_k_scale_bytes(const Group& g, int p) {
  const auto load = [](const uint8_t* b) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  };
  const __m128i a = load(g.scale_low[2 * p]), b = load(g.scale_low[2 * p + 1]);
  const __m128i high = load(g.scale_high[p]);
  const __m128i low4 = _mm_set1_epi8(15), top = _mm_set1_epi8(0x30);
  const auto join = [&](__m128i low, __m128i high_at_4) {
    return _mm_or_si128(_mm_and_si128(low, low4), _mm_and_si128(high_at_4, top));
  };
  return {{join(a, _mm_slli_epi16(high, 4)), join(b, high)},
          {join(_mm_srli_epi16(a, 4), _mm_slli_epi16(high, 2)),
           join(_mm_srli_epi16(b, 4), _mm_srli_epi16(high, 2))}};
}
// Rows [8h, 8h + 8) of 16 unsigned bytes, each in both int16 halves of its row's lane.
inline __m256i row_pairs(__m128i bytes, int h) {
  return _mm256_cvtepu8_epi16(h == 0 ? _mm_unpacklo_epi8(bytes, bytes)
                                     : _mm_unpackhi_epi8(bytes, bytes));
}

template <typename Dp, typename Group>
struct K32Tiles {
  static constexpr bool kVnni = requires(__m256i v) { Dp::dot(v, v, v); };
  static constexpr bool kIq4 = std::is_same_v<Group, GroupIQ4_XS>;
  static constexpr bool kFifthBits = requires(const Group& g) { g.high; };
  // AVX2's signed IQ4_XS products need no offset; VNNI's codes carry 128.
  static constexpr bool kOffset = kIq4 && kVnni;
  static constexpr RowGroupActOffsets kAct = row_group_act_offsets();
  static constexpr int H = 2;  // row halves

  static __m256i load32(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }

  // The codes of weights 32 j + 4 w + i (sub-block j, quad w) of half h's rows.
  static __m256i codes(const Group& g, int j, int w, int h) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    if constexpr (kIq4) {
      // codes[4 j + w % 4]: the low nibbles are quads 0-3, the high ones quads 4-7.
      const __m256i v = load32(g.codes[4 * j + w % 4] + 32 * h);
      __m256i table = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
      if constexpr (kVnni) table = _mm256_xor_si256(table, _mm256_set1_epi8(-128));
      return _mm256_shuffle_epi8(table,
                                 _mm256_and_si256(w < 4 ? v : _mm256_srli_epi16(v, 4), nibble));
    } else {
      // codes[8 m + w] holds sub-block 2m's nibbles low and 2m + 1's high; for Q5_K, bit j of
      // high[w] is the fifth bit, moved to bit 4 (the 16-bit shifts' carries fall outside the
      // mask).
      const __m256i v = load32(g.codes[8 * (j / 2) + w] + 32 * h);
      const __m256i low = _mm256_and_si256(j % 2 == 0 ? v : _mm256_srli_epi16(v, 4), nibble);
      if constexpr (kFifthBits) {
        const __m256i hb = load32(g.high[w] + 32 * h);
        const __m256i fifth = j < 4    ? _mm256_slli_epi16(hb, 4 - j)
                              : j == 4 ? hb
                                       : _mm256_srli_epi16(hb, j - 4);
        return _mm256_or_si256(low, _mm256_and_si256(fifth, _mm256_set1_epi8(0x10)));
      } else {
        return low;
      }
    }
  }

  // IQ4_XS's signed scales ls - 32 of sub-block j, 16 rows as int8.
  static __m128i iq4_scales(const GroupIQ4_XS& g, int j) {
    const __m128i low = _mm_and_si128(
        _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scale_low[j / 2])),
                       4 * (j % 2)),
        _mm_set1_epi8(15));
    // scale_high[r] (16 bits a row): bits 2j and 2j + 1, packed to one byte a row.
    const __m256i high16 = _mm256_and_si256(
        _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.scale_high)),
                          2 * j),
        _mm256_set1_epi16(3));
    const __m128i high =
        _mm_packus_epi16(_mm256_castsi256_si128(high16), _mm256_extracti128_si256(high16, 1));
    return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
  }
  // Rows [8h, 8h + 8) of 16 signed bytes, each in both int16 halves of its row's lane.
  static __m256i signed_pairs(__m128i bytes, int h) {
    return _mm256_cvtepi8_epi16(h == 0 ? _mm_unpacklo_epi8(bytes, bytes)
                                       : _mm_unpackhi_epi8(bytes, bytes));
  }
  static __m256i signed_lanes(__m128i bytes, int h) {
    return _mm256_cvtepi8_epi32(h == 0 ? bytes : _mm_srli_si128(bytes, 8));
  }

  // The activation quad w of sub-block j, broadcast for tokens xs[0..T).
  template <int T>
  static void quads(const uint8_t* const (&xs)[T], int j, int w, __m256i (&x)[T]) {
    for (int t = 0; t < T; ++t) x[t] = broadcast32(xs[t] + kAct.sub16[2 * j + w / 4] + 4 * (w % 4));
  }

  // The mins' sums of one column (Q4_K, Q5_K) for tokens xs[0..T): other[h][t] = sum_j m_j (sum of
  // x).
  template <int T>
  static void add_min_sums(const Group& gc, const uint8_t* const (&xs)[T], __m256i (&other)[H][T]) {
    for (int p = 0; p < 4; ++p) {
      const ScaleMinBytes sm = q4_k_scale_bytes(gc, p);
      for (int e = 0; e < 2; ++e) {
        for (int h = 0; h < H; ++h) {
          add_pair_sums<T>(row_pairs(sm.min[e], h), xs, kAct.pair[2 * p + e], other[h]);
        }
      }
    }
  }
  // The min terms of a group (Q4_K, Q5_K) over nb columns, for tokens x[0..T): a chain of their
  // own, so a tile can sum them after its products, with fewer registers live.
  template <int T>
  static void add_mins(int64_t nb, const Group* g, const uint8_t* x, size_t ldx,
                       __m256 (&mins)[H][T]) {
    for (int64_t c = 0; c < nb; ++c) {
      const uint8_t* xs[T];
      for (int t = 0; t < T; ++t) xs[t] = x + t * ldx + c * kActGroupBytes;
      __m256i other[H][T] = {};
      add_min_sums<T>(g[c], xs, other);
      add_column_term<T>(g[c].dmin, xs, other, mins);
    }
  }
  // One column's exact integer sums for tokens xs[0..T): total[h][t] = sum_j s_j (codes . x),
  // and for VNNI's IQ4_XS offset other[h][t] = sum_j s_j (sum of x). codes_of(j, w, h) gives
  // codes().
  template <int T, typename CodesOf>
  [[gnu::always_inline]] static inline void column(const Group& gc, const uint8_t* const (&xs)[T],
                                                   __m256i (&total)[H][T], __m256i (&other)[H][T],
                                                   const CodesOf& codes_of) {
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m128i scales[2];
      if constexpr (kIq4) {
        scales[0] = iq4_scales(gc, 2 * p);
        scales[1] = iq4_scales(gc, 2 * p + 1);
      } else {
        const ScaleMinBytes sm = q4_k_scale_bytes(gc, p);
        scales[0] = sm.scale[0], scales[1] = sm.scale[1];
      }
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {
        const int j = 2 * p + e;
        if constexpr (kVnni) {
          // Two chains of four quads: one of eight waited on vpdpbusd's latency (one token read
          // 0.7-0.8x as fast from L2); four ran no faster than two.
          constexpr int S = 2;
          __m256i chain[S][H][T] = {};
#pragma GCC unroll 8
          for (int w = 0; w < 8; ++w) {
            __m256i x[T];
            quads(xs, j, w, x);
            for (int h = 0; h < H; ++h) {
              const __m256i u = codes_of(j, w, h);
              for (int t = 0; t < T; ++t) {
                chain[w % S][h][t] = Dp::dot(chain[w % S][h][t], u, x[t]);
              }
            }
          }
          for (int h = 0; h < H; ++h) {
            const __m256i s =
                kIq4 ? signed_lanes(scales[e], h)
                     : _mm256_cvtepu8_epi32(h == 0 ? scales[e] : _mm_srli_si128(scales[e], 8));
            for (int t = 0; t < T; ++t) {
              __m256i dot = chain[0][h][t];
              for (int i = 1; i < S; ++i) dot = _mm256_add_epi32(dot, chain[i][h][t]);
              total[h][t] = _mm256_add_epi32(total[h][t], _mm256_mullo_epi32(dot, s));
            }
          }
        } else if constexpr (kIq4) {
          __m256i s[H];
          for (int h = 0; h < H; ++h) s[h] = signed_pairs(scales[e], h);
#pragma GCC unroll 8
          for (int w = 0; w < 8; ++w) {
            __m256i x[T];
            quads(xs, j, w, x);
            for (int h = 0; h < H; ++h) {
              const __m256i u = codes_of(j, w, h);
              const __m256i magnitude = _mm256_sign_epi8(u, u);
              for (int t = 0; t < T; ++t) {
                const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[t], u));
                total[h][t] = _mm256_add_epi32(total[h][t], _mm256_madd_epi16(pairs, s[h]));
              }
            }
          }
        } else {
          __m256i s[H];
          for (int h = 0; h < H; ++h) s[h] = row_pairs(scales[e], h);
#pragma GCC unroll 2
          for (int half = 0; half < 2; ++half) {
            __m256i chain[H][T] = {};
#pragma GCC unroll 4
            for (int w = 4 * half; w < 4 * half + 4; ++w) {
              __m256i x[T];
              quads(xs, j, w, x);
              for (int h = 0; h < H; ++h) {
                const __m256i u = codes_of(j, w, h);
                for (int t = 0; t < T; ++t) {
                  chain[h][t] = _mm256_add_epi16(chain[h][t], _mm256_maddubs_epi16(u, x[t]));
                }
              }
            }
            for (int h = 0; h < H; ++h) {
              for (int t = 0; t < T; ++t) {
                total[h][t] = _mm256_add_epi32(total[h][t], _mm256_madd_epi16(chain[h][t], s[h]));
              }
            }
          }
        }
        if constexpr (kOffset) {
          // VNNI IQ4_XS's scale against the sub-block's two sums of 16.
          for (int h = 0; h < H; ++h) {
            add_pair_sums<T>(signed_pairs(scales[e], h), xs, kAct.pair[j], other[h]);
          }
        }
      }
    }
  }

  // Tokens x[0..T) against one group over nb columns: y[t * ldy + r]. codes_of(c, j, w, h) gives
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
      column<T>(gc, xs, total, other, [&](int j, int w, int h) { return codes_of(c, j, w, h); });
      // One token sums the mins column by column; a tile after its products (add_mins).
      if constexpr (!kIq4 && T == 1) {
        add_min_sums<T>(gc, xs, other);
        add_column_term<T>(gc.dmin, xs, other, mins);
      }
      if constexpr (kOffset) {
        for (int h = 0; h < H; ++h) {
          for (int t = 0; t < T; ++t) {
            total[h][t] = _mm256_sub_epi32(total[h][t], _mm256_slli_epi32(other[h][t], 7));
          }
        }
      }
      add_column_term<T>(gc.d, xs, total, sum);
    }
    if constexpr (!kIq4 && T > 1) add_mins<T>(nb, g, x, ldx, mins);
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * ldy + 8 * h,
                         kIq4 ? sum[h][t] : _mm256_sub_ps(sum[h][t], mins[h][t]));
      }
    }
  }

  // gemm_row_groups (row_group_columns.h).
  template <int MaxTokens>
  static void gemm(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                   int64_t nt, float* y, size_t ldy) {
    gemm_column_codes<K32Tiles, Group, MaxTokens>(n, w, ldw, ng, x, ldx, nt, y, ldy);
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
