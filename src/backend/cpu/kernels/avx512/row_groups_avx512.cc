// The products over Q2_K and Q3_K row groups (kernels/row_groups.h) with AVX512-VNNI: each 32-bit
// lane is a row from the first instruction to the last. Per quad of four weights, one load of
// 2-bit codes serves four sub-blocks (masked with 3 << 2k: codes times 4^k) and every token of
// the tile; vpdpbusd adds each row's products against the quad's activation bytes, broadcast,
// into that sub-block's sums. Q3_K's high bits join its codes first (u = low + 4 high, 0..7) where
// several tokens share them, once per group for a prompt (gemm_joined). The sums of a sub-block pair are then packed into int16 halves (they
// fit: 16 codes of at most 7 times |x| <= 128) and meet the pair's scales in one vpdpwssd; Q2_K's
// mins and Q3_K's offset of 4 meet the activations' sums of 16 the same way. The generic
// reference (generic/row_groups.cc) gives the same bits.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/row_group_tiles.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"

namespace hearth::cpu::avx512 {
namespace {

// Adds to acc[k][t] the 2-bit codes of sub-blocks 4q + k (times 4^k) against token t: the four
// quads of codes[4q .. 4q + 3].
template <int T>
[[gnu::always_inline]] inline void add_crumbs(const uint8_t (&codes)[16][64], int q,
                                              const uint8_t* const (&xs)[T], __m512i (&acc)[4][T]) {
#pragma GCC unroll 4
  for (int w = 0; w < 4; ++w) {
    const __m512i v = _mm512_loadu_si512(codes[4 * q + w]);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i c = _mm512_and_si512(v, crumb_mask(k));
      for (int t = 0; t < T; ++t) {
        acc[k][t] =
            _mm512_dpbusd_epi32(acc[k][t], c, broadcast32(xs[t] + kAct.sub16[4 * q + k] + 4 * w));
      }
    }
  }
}

// Tokens x[0..T) against one Q2_K group of 16 rows: y[t * ldy + r].
template <int T>
void group_q2_k(int64_t nb, const GroupQ2_K* g, const uint8_t* x, size_t ldx, float* y,
                size_t ldy) {
  const __m512i nibble = _mm512_set1_epi16(0x0f);
  column_loop<T, 0>(
      nb, g, x, ldx, y, ldy,
      [&](const GroupQ2_K& gc, const auto& xs, auto& total, auto& min_total) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          __m512i acc[4][T] = {};
          add_crumbs<T>(gc.codes, q, xs, acc);
      // Sub-blocks 4q, 4q + 1 are pair 2q, sub-blocks 4q + 2, 4q + 3 pair 2q + 1.
#pragma GCC unroll 2
          for (int p = 0; p < 2; ++p) {
            const __m512i bytes = _mm512_cvtepu8_epi16(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.scales[2 * q + p])));
            const __m512i scales = _mm512_and_si512(bytes, nibble);
            const __m512i mins16 = _mm512_srli_epi16(bytes, 4);
            for (int t = 0; t < T; ++t) {
              // The sums come times 4^k: the even one shifted back exactly, the odd one's shift
              // folded into the move to the high half (its low bits are zeros).
              const __m512i even = p == 0 ? acc[0][t] : _mm512_srai_epi32(acc[2][t], 4);
              const __m512i odd = _mm512_slli_epi32(acc[2 * p + 1][t], 14 - 4 * p);
              total[t] = _mm512_dpwssd_epi32(
                  total[t], _mm512_mask_blend_epi16(0xaaaaaaaa, even, odd), scales);
              min_total[t] = _mm512_dpwssd_epi32(min_total[t], mins16,
                                                 broadcast32(xs[t] + kAct.pair[2 * q + p]));
            }
          }
        }
      });
}

// Q3_K's signed scales (s - 32) of sub-blocks 2p and 2p + 1 as int16 pairs, one row per lane.
__m512i q3_k_scale_pair(const GroupQ3_K& g, int p) {
  const __m512i low =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scale_low[p])));
  const __m512i high = _mm512_srli_epi32(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scale_high[p % 4]))),
      4 * (p / 4));
  // (a | b) & c: each byte's two fields to the two int16 halves of its lane.
  constexpr int kOrAnd = 0xa8;
  const __m512i low_pair = _mm512_ternarylogic_epi32(low, _mm512_slli_epi32(low, 12),
                                                     _mm512_set1_epi32(0x000f000f), kOrAnd);
  const __m512i high_pair = _mm512_ternarylogic_epi32(high, _mm512_slli_epi32(high, 14),
                                                      _mm512_set1_epi32(0x00030003), kOrAnd);
  return _mm512_sub_epi16(_mm512_or_si512(low_pair, _mm512_slli_epi32(high_pair, 4)),
                          _mm512_set1_epi16(32));
}

// Q3_K's codes u = low + 4 high (0..7) of sub-block 4q + k, quad w: v the quad's 2-bit codes,
// h the high bits of quads w - w % 2 and w - w % 2 + 1 (bit k + 4 (w % 2) moved to bit 2).
__m512i q3_k_codes(__m512i v, __m512i h, int k, int w) {
  const __m512i low = k == 0 ? v : _mm512_srli_epi16(v, 2 * k);
  const int from = k + 4 * (w % 2);
  const __m512i moved = from < 2    ? _mm512_slli_epi16(h, 2 - from)
                        : from == 2 ? h
                                    : _mm512_srli_epi16(h, from - 2);
  // (low & 3) | (moved & 4): the 16-bit shifts leave other bits beside them.
  constexpr int kAndOr = 0xec;  // (a & c) | b
  return _mm512_ternarylogic_epi32(low, _mm512_and_si512(moved, _mm512_set1_epi8(4)),
                                   _mm512_set1_epi8(3), kAndOr);
}

// Tokens x[0..T) against one Q3_K group of 16 rows: y[t * ldy + r].
template <int T>
void group_q3_k(int64_t nb, const GroupQ3_K* g, const uint8_t* x, size_t ldx, float* y,
                size_t ldy) {
  // total: sum_j s_j (u . x over sub-block j); offset: sum_j s_j (sum of x).
  column_loop<T, 2>(
      nb, g, x, ldx, y, ldy, [&](const GroupQ3_K& gc, const auto& xs, auto& total, auto& offset) {
  // A pair of sub-blocks at a time, each reading its quads' codes again (from L1): the
  // tile's sums stay in registers for four tokens.
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) {
          const int q = p / 2;
          __m512i acc[2][T] = {};
#pragma GCC unroll 2
          for (int e = 0; e < 2; ++e) {
            const int k = 2 * (p % 2) + e;
#pragma GCC unroll 4
            for (int w = 0; w < 4; ++w) {
              const __m512i u = q3_k_codes(_mm512_loadu_si512(gc.codes[4 * q + w]),
                                           _mm512_loadu_si512(gc.high[2 * q + w / 2]), k, w);
              for (int t = 0; t < T; ++t) {
                acc[e][t] = _mm512_dpbusd_epi32(acc[e][t], u,
                                                broadcast32(xs[t] + kAct.sub16[4 * q + k] + 4 * w));
              }
            }
          }
          const __m512i scales = q3_k_scale_pair(gc, p);
          for (int t = 0; t < T; ++t) {
            total[t] = _mm512_dpwssd_epi32(total[t], pack_pair(acc[0][t], acc[1][t]), scales);
            offset[t] = _mm512_dpwssd_epi32(offset[t], scales, broadcast32(xs[t] + kAct.pair[p]));
          }
        }
      });
}

// Q3_K for prompts: a group's codes joined with their high bits once (0..7) and its scale pairs,
// into a buffer every tile reads (gemm_joined); the same sums as group_q3_k.
struct Q3_KColumn {
  __m512i u[16][4];       // [sub-block][quad]
  __m512i scale_pairs[8];  // sub-blocks 2p and 2p + 1's signed scales as int16 pairs
  __m512 d;
};

void join_q3_k(const GroupQ3_K& gc, Q3_KColumn& col) {
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 4
      for (int w = 0; w < 4; ++w) {
        col.u[4 * q + k][w] = q3_k_codes(_mm512_loadu_si512(gc.codes[4 * q + w]),
                                         _mm512_loadu_si512(gc.high[2 * q + w / 2]), k, w);
      }
    }
  }
  for (int p = 0; p < 8; ++p) col.scale_pairs[p] = q3_k_scale_pair(gc, p);
  col.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.d)));
}

template <int T>
struct AddColumnQ3_K {
  [[gnu::always_inline]] static inline void run(const Q3_KColumn& col, const uint8_t* x,
                                                size_t ldx, __m512 (&sum)[T], __m512 (&)[T]) {
    __m512i total[T] = {}, offset[T] = {};
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      __m512i acc[2][T] = {};
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {
        const int j = 2 * p + e;
#pragma GCC unroll 4
        for (int w = 0; w < 4; ++w) {
          for (int t = 0; t < T; ++t) {
            acc[e][t] = _mm512_dpbusd_epi32(acc[e][t], col.u[j][w],
                                            broadcast32(x + t * ldx + kAct.sub16[j] + 4 * w));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        total[t] =
            _mm512_dpwssd_epi32(total[t], pack_pair(acc[0][t], acc[1][t]), col.scale_pairs[p]);
      }
      add_pair_sums<T>(offset, col.scale_pairs[p], x, ldx, p);
    }
    finish_column<T, 2>(col.d, x, ldx, total, offset, sum);
  }
};

// One token against one Q3_K group: the high bits in sums of their own (masked with 1 << k:
// times 2^k) instead of joined to the codes, fewer instructions per weight where no other token
// shares the unpacking; the same integers as group_q3_k.
void group_q3_k_one(int64_t nb, const GroupQ3_K* g, const uint8_t* x, float* y) {
  column_loop<1, 2>(
      nb, g, x, 0, y, 0, [&](const GroupQ3_K& gc, const auto& xs, auto& totals, auto& offsets) {
        __m512i& total = totals[0];
        __m512i& offset = offsets[0];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          __m512i low[4][1] = {}, high[4] = {};
          add_crumbs<1>(gc.codes, q, xs, low);
#pragma GCC unroll 2
          for (int v = 0; v < 2; ++v) {
            const __m512i h = _mm512_loadu_si512(gc.high[2 * q + v]);
            const __m512i h_odd = _mm512_srli_epi16(h, 4);
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
              const __m512i bit = _mm512_set1_epi8(static_cast<char>(1 << k));
              const uint8_t* xk = xs[0] + kAct.sub16[4 * q + k] + 8 * v;
              high[k] = _mm512_dpbusd_epi32(high[k], _mm512_and_si512(h, bit), broadcast32(xk));
              high[k] =
                  _mm512_dpbusd_epi32(high[k], _mm512_and_si512(h_odd, bit), broadcast32(xk + 4));
            }
          }
#pragma GCC unroll 2
          for (int p = 0; p < 2; ++p) {
            // low + 4 high of sub-blocks 4q + 2p and 4q + 2p + 1: low came times 4^k, high times
            // 2^k; both shifted back exactly.
            __m512i u[2];
            for (int e = 0; e < 2; ++e) {
              const int k = 2 * p + e;
              const __m512i l = _mm512_srai_epi32(low[k][0], 2 * k);
              const __m512i hi =
                  k < 3 ? _mm512_slli_epi32(high[k], 2 - k) : _mm512_srai_epi32(high[k], 1);
              u[e] = _mm512_add_epi32(l, hi);
            }
            const __m512i scales = q3_k_scale_pair(gc, 2 * q + p);
            total = _mm512_dpwssd_epi32(total, pack_pair(u[0], u[1]), scales);
            offset = _mm512_dpwssd_epi32(offset, scales, broadcast32(xs[0] + kAct.pair[2 * q + p]));
          }
        }
      });
}

template <int T>
struct Q2_K {
  static void run(int64_t nb, const GroupQ2_K* g, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    group_q2_k<T>(nb, g, x, ldx, y, ldy);
  }
};
template <int T>
struct Q3_K {
  static void run(int64_t nb, const GroupQ3_K* g, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    if constexpr (T == 1) {
      group_q3_k_one(nb, g, x, y);
    } else {
      group_q3_k<T>(nb, g, x, ldx, y, ldy);
    }
  }
};

}  // namespace

void set_row_group_kernels(Kernels& k) {
  // Every type's rewrite (and scalar product) again, since the AVX2 table this one starts from
  // clears the types it has no kernels for; every product is replaced below.
  generic::set_row_group_kernels(k);
  k.q2_k.gemm_row_groups = gemm_groups<GroupQ2_K, 4, Q2_K>;
  k.q3_k.gemm_row_groups =
      gemm_joined_prompts<GroupQ3_K, Q3_KColumn, AddColumnQ3_K, join_q3_k, Q3_K>;
  set_nibble_row_group_kernels(k);
  set_q6_k_row_group_kernels(k);
  set_row_group_32_kernels(k);
}

}  // namespace hearth::cpu::avx512
