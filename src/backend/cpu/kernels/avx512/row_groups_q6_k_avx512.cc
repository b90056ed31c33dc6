// The products over Q6_K row groups (kernels/row_groups.h) with AVX512-VNNI, as
// row_groups_avx512.cc's: one row per 32-bit lane, each quad's codes loaded once for every token
// of a tile, vpdpbusd against the quad's activation bytes broadcast. One token keeps the low and
// top-bit sums apart (packed as an int16 pair against (scale, 16 scale)); more tokens join the
// codes into 0..63 once per column or, for prompts, once per group (gemm_joined). The generic
// reference (generic/row_groups.cc) gives the same bits.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/row_group_tiles.h"

namespace hearth::cpu::avx512 {
namespace {

// Tokens x[0..T) against one Q6_K group of 16 rows: y[t * ldy + r], the low and top bits in
// sums of their own (packed as an int16 pair against (scale, 16 scale)): the fewest instructions
// for one token. One 32-block at a time (its bytes read again for the other block sharing them,
// from L1).
template <int T>
void group_q6_k_split(int64_t nb, const GroupQ6_K* g, const uint8_t* x, size_t ldx, float* y,
                      size_t ldy) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  column_loop<T, 5>(
      nb, g, x, ldx, y, ldy, [&](const GroupQ6_K& gc, const auto& xs, auto& total, auto& offset) {
#pragma GCC unroll 8
        for (int b = 0; b < 8; ++b) {
          const int m = b / 2, e = b % 2;
          // Sub-block 2b + h's low sums (times 16^e) and top-bit sums (times 4^(e + 2h)).
          __m512i low[2][T] = {}, high[2][T] = {};
#pragma GCC unroll 8
          for (int w = 0; w < 8; ++w) {
            const __m512i v = _mm512_loadu_si512(gc.low[8 * m + w]);
            const __m512i codes =
                e == 0 ? _mm512_and_si512(v, nibble) : _mm512_andnot_si512(nibble, v);
            const int64_t at = kAct.sub16[2 * b + w / 4] + 4 * (w % 4);
            for (int t = 0; t < T; ++t) {
              low[w / 4][t] = _mm512_dpbusd_epi32(low[w / 4][t], codes, broadcast32(xs[t] + at));
            }
          }
#pragma GCC unroll 4
          for (int w = 0; w < 4; ++w) {
            const __m512i v = _mm512_loadu_si512(gc.high[4 * m + w]);
            for (int h = 0; h < 2; ++h) {
              const __m512i codes = _mm512_and_si512(v, crumb_mask(e + 2 * h));
              const int64_t at = kAct.sub16[2 * b + h] + 4 * w;
              for (int t = 0; t < T; ++t) {
                high[h][t] = _mm512_dpbusd_epi32(high[h][t], codes, broadcast32(xs[t] + at));
              }
            }
          }
          __m512i scales[2], weights[2];
          for (int h = 0; h < 2; ++h) {
            scales[h] = _mm512_cvtepi8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.scales[2 * b + h])));
            // (s, 16 s): against (low sum, top-bit sum).
            weights[h] =
                _mm512_mask_blend_epi16(0xaaaaaaaa, scales[h], _mm512_slli_epi32(scales[h], 20));
          }
          const __m512i scale_pair =
              _mm512_mask_blend_epi16(0xaaaaaaaa, scales[0], _mm512_slli_epi32(scales[1], 16));
          for (int t = 0; t < T; ++t) {
            for (int h = 0; h < 2; ++h) {
              const __m512i l = e == 0 ? low[h][t] : _mm512_srai_epi32(low[h][t], 4);
              const __m512i hi = _mm512_slli_epi32(high[h][t], 16 - 2 * (e + 2 * h));
              total[t] = _mm512_dpwssd_epi32(total[t], _mm512_mask_blend_epi16(0xaaaaaaaa, l, hi),
                                             weights[h]);
            }
            offset[t] =
                _mm512_dpwssd_epi32(offset[t], scale_pair, broadcast32(xs[t] + kAct.pair[b]));
          }
        }
      });
}

// Several tokens over Q6_K groups: a super-block column's codes joined once (u = low | top << 4,
// 0..63) with its scales, for every tile of tokens to read, one vpdpbusd per quad and token (a
// decode step's few tokens join one column at a time, a prompt a whole group: gemm_q6_k). A
// sub-block's sum can pass 2^15, so it meets its scale in int32 (vpmulld).
struct Q6_KColumn {
  __m512i u[8][8];     // [32-block][quad]
  __m512i scales[16];  // int32, one row per lane
  __m512i pairs[8];    // the scales of sub-blocks 2b and 2b + 1 as int16 pairs
  __m512 d;
};

void join_q6_k(const GroupQ6_K& gc, Q6_KColumn& col) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i top = _mm512_set1_epi8(0x30);
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    const int m = b / 2, e = b % 2;
#pragma GCC unroll 8
    for (int w = 0; w < 8; ++w) {
      const __m512i v = _mm512_loadu_si512(gc.low[8 * m + w]);
      const __m512i low = e == 0 ? v : _mm512_srli_epi16(v, 4);
      // Top bits at 2k, k = e + 2 (w / 4), moved to bits 4-5.
      const int k = e + 2 * (w / 4);
      const __m512i hv = _mm512_loadu_si512(gc.high[4 * m + w % 4]);
      const __m512i moved = k < 2    ? _mm512_slli_epi16(hv, 4 - 2 * k)
                            : k == 2 ? hv
                                     : _mm512_srli_epi16(hv, 2);
      col.u[b][w] = _mm512_ternarylogic_epi32(_mm512_and_si512(low, nibble), moved, top,
                                              0xf8);  // a | (b & c)
    }
  }
  for (int j = 0; j < 16; ++j) {
    col.scales[j] =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.scales[j])));
  }
  for (int b = 0; b < 8; ++b) {
    col.pairs[b] = _mm512_mask_blend_epi16(0xaaaaaaaa, col.scales[2 * b],
                                           _mm512_slli_epi32(col.scales[2 * b + 1], 16));
  }
  col.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.d)));
}

// Tokens x[0..T) (their activation super-blocks of this column) against a joined column, its
// terms added to the rows' running sums (sum[t], one row per lane).
template <int T>
[[gnu::always_inline]] inline void add_column_q6_k(const Q6_KColumn& col, const uint8_t* x,
                                                   size_t ldx, __m512 (&sum)[T]) {
  __m512i total[T] = {}, offset[T] = {};
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    __m512i acc[2][T] = {};
#pragma GCC unroll 8
    for (int w = 0; w < 8; ++w) {
      const int64_t at = kAct.sub16[2 * b + w / 4] + 4 * (w % 4);
      for (int t = 0; t < T; ++t) {
        acc[w / 4][t] =
            _mm512_dpbusd_epi32(acc[w / 4][t], col.u[b][w], broadcast32(x + t * ldx + at));
      }
    }
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < 2; ++h) {
        total[t] = _mm512_add_epi32(total[t], _mm512_mullo_epi32(acc[h][t], col.scales[2 * b + h]));
      }
    }
    add_pair_sums<T>(offset, col.pairs[b], x, ldx, b);
  }
  finish_column<T, 5>(col.d, x, ldx, total, offset, sum);
}

// Q6_K's joined columns for add_column_q6_k.
template <int T>
struct AddColumnQ6_K {
  [[gnu::always_inline]] static inline void run(const Q6_KColumn& col, const uint8_t* x, size_t ldx,
                                                __m512 (&sum)[T], __m512 (&)[T]) {
    add_column_q6_k<T>(col, x, ldx, sum);
  }
};

// Q6_K: one token through group_q6_k_split. More tokens through joined columns: a few (decode
// steps) join one column at a time on the stack and run every tile over it, adding into y; a
// prompt joins each group's columns once into a buffer of its own and runs its tiles over them
// all, the activation rows read in order and the sums kept in registers. Every path adds a row's
// column terms in the same order from zero, so they give the same bits.
void gemm_q6_k(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  const int64_t nb = n / kQK_K;
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto group = [&](int64_t gi) {
    return reinterpret_cast<const GroupQ6_K*>(static_cast<const uint8_t*>(w) +
                                              gi * kGroupRows * ldw);
  };
  if (nt == 1) {
    for (int64_t gi = 0; gi < ng; ++gi) {
      group_q6_k_split<1>(nb, group(gi), xb, ldx, y + gi * kGroupRows, ldy);
    }
    return;
  }
  if (unpack_codes(nt)) {
    gemm_joined<GroupQ6_K, Q6_KColumn, AddColumnQ6_K>(n, w, ldw, ng, xb, ldx, nt, y, ldy,
                                                      join_q6_k);
    return;
  }
  Q6_KColumn col;
  for (int64_t gi = 0; gi < ng; ++gi) {
    float* yg = y + gi * kGroupRows;
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(yg + t * ldy, _mm512_setzero_ps());
    for (int64_t c = 0; c < nb; ++c) {
      join_q6_k(group(gi)[c], col);
      const uint8_t* xc = xb + c * kActGroupBytes;
      for_each_group_tile<4>(1, nt, [&](int64_t, int64_t t, auto tokens) {
        constexpr int T = decltype(tokens)::value;
        __m512 sum[T];
        for (int i = 0; i < T; ++i) sum[i] = _mm512_loadu_ps(yg + (t + i) * ldy);
        add_column_q6_k<T>(col, xc + t * ldx, ldx, sum);
        for (int i = 0; i < T; ++i) _mm512_storeu_ps(yg + (t + i) * ldy, sum[i]);
      });
    }
  }
}

}  // namespace

void set_q6_k_row_group_kernels(Kernels& k) { k.q6_k.gemm_row_groups = gemm_q6_k; }

}  // namespace hearth::cpu::avx512
