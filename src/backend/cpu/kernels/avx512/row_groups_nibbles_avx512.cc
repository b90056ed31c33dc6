// The products over Q4_K, Q5_K and IQ4_XS row groups (kernels/row_groups.h) with AVX512-VNNI, as
// row_groups_avx512.cc's: one row per 32-bit lane, each quad's codes loaded once for every token
// of a tile (low nibbles masked with 0x0f, high ones with 0xf0: times 16), vpdpbusd against the
// quad's activation bytes broadcast. Q4_K packs the sums of a sub-block's two halves of 16 (its
// whole can pass 2^15) as an int16 pair against its scale in both halves. Prompts join each
// group's codes (and scales) once into a buffer their tiles read (gemm_joined). The generic reference (generic/row_groups.cc) gives the same bits.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/row_group_tiles.h"

namespace hearth::cpu::avx512 {
namespace {

// Q4_K's (or Q5_K's) scale and min of sub-block j, one row per lane: each in both int16 halves of
// the lane (`scale_pair`, `min_pair`), and the scale as int32 (`scale`).
struct ScaleMinPairs {
  __m512i scale_pair, min_pair, scale;
};
template <typename Group>
ScaleMinPairs q4_k_scales(const Group& g, int j) {
  const __m512i low =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scale_low[j])));
  const __m512i high = _mm512_srli_epi32(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scale_high[j / 2]))),
      4 * (j % 2));
  const __m512i top = _mm512_set1_epi32(0x30);
  const __m512i scale = _mm512_or_si512(_mm512_and_si512(low, _mm512_set1_epi32(15)),
                                        _mm512_and_si512(_mm512_slli_epi32(high, 4), top));
  const __m512i min =
      _mm512_or_si512(_mm512_srli_epi32(low, 4), _mm512_and_si512(_mm512_slli_epi32(high, 2), top));
  return {_mm512_or_si512(scale, _mm512_slli_epi32(scale, 16)),
          _mm512_or_si512(min, _mm512_slli_epi32(min, 16)), scale};
}

// Tokens x[0..T) against one Q4_K group of 16 rows: y[t * ldy + r].
template <int T>
void group_q4_k(int64_t nb, const GroupQ4_K* g, const uint8_t* x, size_t ldx, float* y,
                size_t ldy) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  column_loop<T, 0>(
      nb, g, x, ldx, y, ldy,
      [&](const GroupQ4_K& gc, const auto& xs, auto& total, auto& min_total) {
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) {
          // acc[e][h][t]: sub-block 2m + e, half h (quads 4h .. 4h + 3), token t; e = 1 times 16.
          __m512i acc[2][2][T] = {};
#pragma GCC unroll 8
          for (int w = 0; w < 8; ++w) {
            const __m512i v = _mm512_loadu_si512(gc.codes[8 * m + w]);
            const __m512i codes[2] = {_mm512_and_si512(v, nibble), _mm512_andnot_si512(nibble, v)};
            for (int e = 0; e < 2; ++e) {
              const int64_t at = kAct.sub16[2 * (2 * m + e) + w / 4] + 4 * (w % 4);
              for (int t = 0; t < T; ++t) {
                acc[e][w / 4][t] =
                    _mm512_dpbusd_epi32(acc[e][w / 4][t], codes[e], broadcast32(xs[t] + at));
              }
            }
          }
#pragma GCC unroll 2
          for (int e = 0; e < 2; ++e) {
            const int j = 2 * m + e;
            const ScaleMinPairs sm = q4_k_scales(gc, j);
            for (int t = 0; t < T; ++t) {
              // The halves' sums as an int16 pair (the high nibbles' shifted back exactly).
              const __m512i first = e == 0 ? acc[0][0][t] : _mm512_srai_epi32(acc[1][0][t], 4);
              const __m512i second = _mm512_slli_epi32(acc[e][1][t], e == 0 ? 16 : 12);
              total[t] = _mm512_dpwssd_epi32(
                  total[t], _mm512_mask_blend_epi16(0xaaaaaaaa, first, second), sm.scale_pair);
              min_total[t] =
                  _mm512_dpwssd_epi32(min_total[t], sm.min_pair, broadcast32(xs[t] + kAct.pair[j]));
            }
          }
        }
      });
}

// Tokens x[0..T) against one Q5_K group of 16 rows: y[t * ldy + r]. The nibbles with their fifth
// bits joined at bit 4 (0..31); a sub-block's sum, which can pass 2^15 even per half, meets its
// scale in int32 (vpmulld).
template <int T>
void group_q5_k(int64_t nb, const GroupQ5_K* g, const uint8_t* x, size_t ldx, float* y,
                size_t ldy) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  column_loop<T, 0>(
      nb, g, x, ldx, y, ldy,
      [&](const GroupQ5_K& gc, const auto& xs, auto& total, auto& min_total) {
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) {
          // acc[e][t]: sub-block 2m + e, token t.
          __m512i acc[2][T] = {};
#pragma GCC unroll 8
          for (int w = 0; w < 8; ++w) {
            const __m512i v = _mm512_loadu_si512(gc.codes[8 * m + w]);
            const __m512i h = _mm512_loadu_si512(gc.high[w]);
            const __m512i codes[2] = {
                join_bit_4(_mm512_and_si512(v, nibble), h, 2 * m),
                join_bit_4(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), h, 2 * m + 1)};
            for (int e = 0; e < 2; ++e) {
              const int64_t at = kAct.sub16[2 * (2 * m + e) + w / 4] + 4 * (w % 4);
              for (int t = 0; t < T; ++t) {
                acc[e][t] = _mm512_dpbusd_epi32(acc[e][t], codes[e], broadcast32(xs[t] + at));
              }
            }
          }
#pragma GCC unroll 2
          for (int e = 0; e < 2; ++e) {
            const int j = 2 * m + e;
            const ScaleMinPairs sm = q4_k_scales(gc, j);
            for (int t = 0; t < T; ++t) {
              total[t] = _mm512_add_epi32(total[t], _mm512_mullo_epi32(acc[e][t], sm.scale));
              min_total[t] =
                  _mm512_dpwssd_epi32(min_total[t], sm.min_pair, broadcast32(xs[t] + kAct.pair[j]));
            }
          }
        }
      });
}

// IQ4_XS's signed scale of sub-block j (6 bits less 32), int32, one row per lane: the low 4 bits
// from scale_low (nibbles), the high 2 from high_bits (scale_high widened, 2 bits a sub-block).
inline __m512i iq4_xs_scale(const GroupIQ4_XS& g, __m512i high_bits, int j) {
  const __m512i low =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scale_low[j / 2])));
  const __m512i ls = _mm512_or_si512(
      _mm512_and_si512(_mm512_srli_epi32(low, 4 * (j % 2)), _mm512_set1_epi32(15)),
      _mm512_slli_epi32(
          _mm512_and_si512(_mm512_srli_epi32(high_bits, 2 * j), _mm512_set1_epi32(3)), 4));
  return _mm512_sub_epi32(ls, _mm512_set1_epi32(32));
}

// Tokens x[0..T) against one IQ4_XS group of 16 rows: y[t * ldy + r]. Each nibble looked up
// (vpshufb) as its table value plus 128; a sub-block's sum meets its signed scale in int32
// (vpmulld), and the scale pairs meet the activations' sums of 16 for the 128s taken off.
template <int T>
void group_iq4_xs(int64_t nb, const GroupIQ4_XS* g, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i table = iq4_offset_book();
  column_loop<T, 7>(
      nb, g, x, ldx, y, ldy, [&](const GroupIQ4_XS& gc, const auto& xs, auto& total, auto& offset) {
        const __m512i high_bits = _mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.scale_high)));
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          // The low and high nibbles' sums apart: two chains of vpdpbusd.
          __m512i low[T] = {}, high[T] = {};
#pragma GCC unroll 4
          for (int w = 0; w < 4; ++w) {
            const __m512i v = _mm512_loadu_si512(gc.codes[4 * j + w]);
            const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(v, nibble));
            const __m512i hi =
                _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
            for (int t = 0; t < T; ++t) {
              low[t] =
                  _mm512_dpbusd_epi32(low[t], lo, broadcast32(xs[t] + kAct.sub16[2 * j] + 4 * w));
              high[t] = _mm512_dpbusd_epi32(high[t], hi,
                                            broadcast32(xs[t] + kAct.sub16[2 * j + 1] + 4 * w));
            }
          }
          const __m512i scale = iq4_xs_scale(gc, high_bits, j);
          // The scale in both int16 halves of the lane (two's complement in the low one).
          const __m512i pair = pack_pair(scale, scale);
          for (int t = 0; t < T; ++t) {
            total[t] = _mm512_add_epi32(
                total[t], _mm512_mullo_epi32(_mm512_add_epi32(low[t], high[t]), scale));
            offset[t] = _mm512_dpwssd_epi32(offset[t], pair, broadcast32(xs[t] + kAct.pair[j]));
          }
        }
      });
}

template <int T>
struct IQ4_XS {
  static void run(int64_t nb, const GroupIQ4_XS* g, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    group_iq4_xs<T>(nb, g, x, ldx, y, ldy);
  }
};

template <int T>
struct Q5_K {
  static void run(int64_t nb, const GroupQ5_K* g, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    group_q5_k<T>(nb, g, x, ldx, y, ldy);
  }
};

template <int T>
struct Q4_K {
  static void run(int64_t nb, const GroupQ4_K* g, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    group_q4_k<T>(nb, g, x, ldx, y, ldy);
  }
};

// IQ4_XS for prompts: a group's columns looked up once (both nibbles of every code vector, the
// signed scales and their pairs) into a buffer every tile of tokens reads, as Q6_K's joined
// columns; the same sums as group_iq4_xs.
struct IQ4_XSColumn {
  __m512i lo[8][4], hi[8][4];  // [sub-block of 32][quad]: table values plus 128
  __m512i scales[8];           // int32, one row per lane
  __m512i pairs[8];            // the scale in both int16 halves
  __m512 d;
};

void join_iq4_xs(const GroupIQ4_XS& gc, IQ4_XSColumn& col) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i table = iq4_offset_book();
  const __m512i high_bits =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.scale_high)));
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      const __m512i v = _mm512_loadu_si512(gc.codes[4 * j + w]);
      col.lo[j][w] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, nibble));
      col.hi[j][w] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
    }
    col.scales[j] = iq4_xs_scale(gc, high_bits, j);
    col.pairs[j] = pack_pair(col.scales[j], col.scales[j]);
  }
  col.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.d)));
}

// Tokens x[0..T) (their activation super-blocks of this column) against a joined IQ4_XS column,
// its terms added to the rows' running sums.
template <int T>
struct AddColumnIQ4_XS {
  [[gnu::always_inline]] static inline void run(const IQ4_XSColumn& col, const uint8_t* x,
                                                size_t ldx, __m512 (&sum)[T], __m512 (&)[T]) {
    __m512i total[T] = {}, offset[T] = {};
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i low[T] = {}, high[T] = {};
#pragma GCC unroll 4
      for (int w = 0; w < 4; ++w) {
        for (int t = 0; t < T; ++t) {
          low[t] = _mm512_dpbusd_epi32(low[t], col.lo[j][w],
                                       broadcast32(x + t * ldx + kAct.sub16[2 * j] + 4 * w));
          high[t] = _mm512_dpbusd_epi32(high[t], col.hi[j][w],
                                        broadcast32(x + t * ldx + kAct.sub16[2 * j + 1] + 4 * w));
        }
      }
      for (int t = 0; t < T; ++t) {
        total[t] = _mm512_add_epi32(
            total[t], _mm512_mullo_epi32(_mm512_add_epi32(low[t], high[t]), col.scales[j]));
      }
      add_pair_sums<T>(offset, col.pairs[j], x, ldx, j);
    }
    finish_column<T, 7>(col.d, x, ldx, total, offset, sum);
  }
};

// Q4_K and Q5_K for prompts: a group's codes (Q5_K's with their fifth bits joined, 0..31) once,
// with the scales and min pairs, into a buffer every tile reads. Each sub-block's sum meets its
// scale in int32 (vpmulld), one chain per sub-block and token: for Q4_K the same integers as
// group_q4_k's pairs of halves, with half the chains and fewer operations after them.
struct K32Column {
  __m512i u[8][8];       // [sub-block of 32][quad]
  __m512i scales[8];     // int32, one row per lane
  __m512i min_pairs[8];  // the min in both int16 halves
  __m512 d, dmin;
};

// A Q4_K or Q5_K column joined: the nibbles (Q5_K's with their fifth bits at bit 4), the scales,
// min pairs and factors.
template <typename Group>
void join_k32(const Group& gc, K32Column& col) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
#pragma GCC unroll 8
    for (int w = 0; w < 8; ++w) {
      const __m512i v = _mm512_loadu_si512(gc.codes[8 * m + w]);
      __m512i u[2] = {_mm512_and_si512(v, nibble),
                      _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble)};
      if constexpr (std::is_same_v<Group, GroupQ5_K>) {
        const __m512i h = _mm512_loadu_si512(gc.high[w]);
        for (int e = 0; e < 2; ++e) u[e] = join_bit_4(u[e], h, 2 * m + e);
      }
      for (int e = 0; e < 2; ++e) col.u[2 * m + e][w] = u[e];
    }
  }
  for (int j = 0; j < 8; ++j) {
    const ScaleMinPairs sm = q4_k_scales(gc, j);
    col.scales[j] = sm.scale;
    col.min_pairs[j] = sm.min_pair;
  }
  col.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.d)));
  col.dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.dmin)));
}

template <int T>
struct AddColumnK32 {
  [[gnu::always_inline]] static inline void run(const K32Column& col, const uint8_t* x,
                                                size_t ldx, __m512 (&sum)[T], __m512 (&mins)[T]) {
    __m512i total[T] = {}, min_total[T] = {};
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i acc[T] = {};
#pragma GCC unroll 8
      for (int w = 0; w < 8; ++w) {
        const int64_t at = kAct.sub16[2 * j + w / 4] + 4 * (w % 4);
        for (int t = 0; t < T; ++t) {
          acc[t] = _mm512_dpbusd_epi32(acc[t], col.u[j][w], broadcast32(x + t * ldx + at));
        }
      }
      for (int t = 0; t < T; ++t) {
        total[t] = _mm512_add_epi32(total[t], _mm512_mullo_epi32(acc[t], col.scales[j]));
      }
      add_pair_sums<T>(min_total, col.min_pairs[j], x, ldx, j);
    }
    finish_column_mins<T>(col.d, col.dmin, x, ldx, total, min_total, sum, mins);
  }
};

}  // namespace

void set_nibble_row_group_kernels(Kernels& k) {
  k.q4_k.gemm_row_groups =
      gemm_joined_prompts<GroupQ4_K, K32Column, AddColumnK32, join_k32<GroupQ4_K>, Q4_K>;
  k.q5_k.gemm_row_groups =
      gemm_joined_prompts<GroupQ5_K, K32Column, AddColumnK32, join_k32<GroupQ5_K>, Q5_K>;
  k.iq4_xs.gemm_row_groups =
      gemm_joined_prompts<GroupIQ4_XS, IQ4_XSColumn, AddColumnIQ4_XS, join_iq4_xs, IQ4_XS>;
}

}  // namespace hearth::cpu::avx512
