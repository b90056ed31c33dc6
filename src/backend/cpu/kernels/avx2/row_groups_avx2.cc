// The products over Q2_K and Q4_K row groups (kernels/row_groups.h) with AVX2: each 32-bit lane
// of a 256-bit vector is a row, a group taken as two halves of 8 rows (bytes 0-31 and 32-63 of
// each code vector). vpmaddubsw of a sub-block's codes (shifted down to 0..3, or a nibble)
// against four activation bytes broadcast gives each row two int16 partial sums, added over the
// sub-block's quads (at most 4 * 2 * 3 * 128, or 8 * 2 * 15 * 128: no saturation); vpmaddwd
// against the sub-block's scale in both halves of the row's lane then gives scale times the
// sub-block's sum, exactly. The mins meet the activations' sums of 16 by vpmaddwd too. A lone
// Q4_K token takes both halves at once (one_token_q4_k). The generic reference
// (generic/row_groups.cc) gives the same bits.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/row_groups.h"
#include "backend/cpu/kernels/tile_set.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_k32_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

// The activation offsets, evaluated here at compile time (see row_groups.h).
constexpr RowGroupActOffsets kAct = row_group_act_offsets();

__m256i broadcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// Each row's int16 element 0 (`odd` false) or 1 of its lane in both halves of the lane.
__m256i duplicate_halves(__m256i pairs, bool odd) {
  const __m256i even = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0,
                                        1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  return _mm256_shuffle_epi8(pairs, odd ? _mm256_add_epi8(even, _mm256_set1_epi8(2)) : even);
}

// Adds scale * sum to total for the four sub-blocks 4q + k: acc[k] the int16 pair sums of each,
// pairs[p] the int16 scale pairs of sub-blocks 4q + 2p, 4q + 2p + 1.
template <int T>
[[gnu::always_inline]] inline void add_scaled(const __m256i (&acc)[4][T], const __m256i (&pairs)[2],
                                              __m256i (&total)[T]) {
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i scale = duplicate_halves(pairs[k / 2], k % 2 != 0);
    for (int t = 0; t < T; ++t) {
      total[t] = _mm256_add_epi32(total[t], _mm256_madd_epi16(acc[k][t], scale));
    }
  }
}

// The super-block column loop of the half-group kernels, as the 512-bit one
// (avx512/row_group_tiles.h) for groups with mins: column(gc, xs, total, min_total) adds one
// column's sums for tokens xs[0..T), and a row's result is d dx total - dmin dx min_total, two
// running sums over the columns.
template <int T, typename Group, typename Column>
[[gnu::always_inline]] inline void column_loop(int64_t nb, const Group* g, int h, const uint8_t* x,
                                               size_t ldx, float* y, size_t ldy,
                                               const Column& column) {
  __m256 sum[T] = {}, mins[T] = {};
  for (int64_t c = 0; c < nb; ++c) {
    const Group& gc = g[c];
    if constexpr (T == 1) prefetch_column(gc);
    const uint8_t* xs[T];
    for (int t = 0; t < T; ++t) xs[t] = x + t * ldx + c * kActGroupBytes;
    __m256i total[T] = {}, min_total[T] = {};
    column(gc, xs, total, min_total);
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.d + 8 * h)));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.dmin + 8 * h)));
    for (int t = 0; t < T; ++t) {
      float dx;
      std::memcpy(&dx, xs[t] + kActScalesOffset, sizeof dx);
      const __m256 vdx = _mm256_set1_ps(dx);
      sum[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, vdx), _mm256_cvtepi32_ps(total[t]), sum[t]);
      mins[t] =
          _mm256_fmadd_ps(_mm256_mul_ps(dmin, vdx), _mm256_cvtepi32_ps(min_total[t]), mins[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ldy, _mm256_sub_ps(sum[t], mins[t]));
}

// Tokens x[0..T) against rows [8h, 8h + 8) of one Q2_K group: y[t * ldy + r].
template <int T>
void half_q2_k(int64_t nb, const GroupQ2_K* g, int h, const uint8_t* x, size_t ldx, float* y,
               size_t ldy) {
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i nibble = _mm256_set1_epi16(0x0f);
  column_loop<T>(
      nb, g, h, x, ldx, y, ldy,
      [&](const GroupQ2_K& gc, const auto& xs, auto& total, auto& min_total) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          __m256i acc[4][T] = {};
#pragma GCC unroll 4
          for (int w = 0; w < 4; ++w) {
            const __m256i v =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.codes[4 * q + w] + 32 * h));
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
              const __m256i codes = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), three);
              for (int t = 0; t < T; ++t) {
                acc[k][t] = _mm256_add_epi16(
                    acc[k][t], _mm256_maddubs_epi16(
                                   codes, broadcast32(xs[t] + kAct.sub16[4 * q + k] + 4 * w)));
              }
            }
          }
          __m256i scales[2];
#pragma GCC unroll 2
          for (int p = 0; p < 2; ++p) {
            const __m256i bytes = _mm256_cvtepu8_epi16(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.scales[2 * q + p] + 16 * h)));
            scales[p] = _mm256_and_si256(bytes, nibble);
            const __m256i mins16 = _mm256_srli_epi16(bytes, 4);
            for (int t = 0; t < T; ++t) {
              min_total[t] = _mm256_add_epi32(
                  min_total[t],
                  _mm256_madd_epi16(mins16, broadcast32(xs[t] + kAct.pair[2 * q + p])));
            }
          }
          add_scaled<T>(acc, scales, total);
        }
      });
}

// 8 bytes at p, one per lane.
__m256i lane_bytes(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Q4_K's scale and min of sub-block j for rows [8h, 8h + 8), each in both int16 halves of its
// row's lane.
struct ScaleMinPairs {
  __m256i scale, min;
};
ScaleMinPairs q4_k_scales(const GroupQ4_K& g, int j, int h) {
  const __m256i low = lane_bytes(g.scale_low[j] + 8 * h);
  const __m256i high = _mm256_srli_epi32(lane_bytes(g.scale_high[j / 2] + 8 * h), 4 * (j % 2));
  const __m256i top = _mm256_set1_epi32(0x30);
  const __m256i scale = _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi32(15)),
                                        _mm256_and_si256(_mm256_slli_epi32(high, 4), top));
  const __m256i min =
      _mm256_or_si256(_mm256_srli_epi32(low, 4), _mm256_and_si256(_mm256_slli_epi32(high, 2), top));
  return {_mm256_or_si256(scale, _mm256_slli_epi32(scale, 16)),
          _mm256_or_si256(min, _mm256_slli_epi32(min, 16))};
}

// Tokens x[0..T) against rows [8h, 8h + 8) of one Q4_K group: y[t * ldy + r]. A sub-block's 8
// quads add into one int16 pair per row (at most 8 * 2 * 15 * 128).
template <int T>
void half_q4_k(int64_t nb, const GroupQ4_K* g, int h, const uint8_t* x, size_t ldx, float* y,
               size_t ldy) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  column_loop<T>(
      nb, g, h, x, ldx, y, ldy,
      [&](const GroupQ4_K& gc, const auto& xs, auto& total, auto& min_total) {
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) {
          __m256i acc[2][T] = {};
#pragma GCC unroll 8
          for (int w = 0; w < 8; ++w) {
            const __m256i v =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.codes[8 * m + w] + 32 * h));
            const __m256i codes[2] = {_mm256_and_si256(v, nibble),
                                      _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)};
            for (int e = 0; e < 2; ++e) {
              const int64_t at = kAct.sub16[2 * (2 * m + e) + w / 4] + 4 * (w % 4);
              for (int t = 0; t < T; ++t) {
                acc[e][t] = _mm256_add_epi16(
                    acc[e][t], _mm256_maddubs_epi16(codes[e], broadcast32(xs[t] + at)));
              }
            }
          }
          for (int e = 0; e < 2; ++e) {
            const int j = 2 * m + e;
            const ScaleMinPairs sm = q4_k_scales(gc, j, h);
            for (int t = 0; t < T; ++t) {
              total[t] = _mm256_add_epi32(total[t], _mm256_madd_epi16(acc[e][t], sm.scale));
              min_total[t] = _mm256_add_epi32(
                  min_total[t], _mm256_madd_epi16(sm.min, broadcast32(xs[t] + kAct.pair[j])));
            }
          }
        }
      });
}

// One token against a whole Q4_K group (both halves at once, so each activation broadcast meets
// 16 rows, and each sub-block pair's scales decoded once for 16 rows): y[r]. The same integer
// sums and FMAs as half_q4_k.
void one_token_q4_k(int64_t nb, const GroupQ4_K* g, const uint8_t* x, float* y) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  __m256 sum[2] = {}, mins[2] = {};
  for (int64_t c = 0; c < nb; ++c) {
    const GroupQ4_K& gc = g[c];
    prefetch_column(gc);
    const uint8_t* xs = x + c * kActGroupBytes;
    __m256i total[2] = {}, min_total[2] = {};
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      // acc[e][h]: sub-block 2m + e, half h, in int16 pairs (at most 8 * 2 * 15 * 127).
      __m256i acc[2][2] = {};
#pragma GCC unroll 8
      for (int w = 0; w < 8; ++w) {
        __m256i xe[2];
        for (int e = 0; e < 2; ++e) {
          xe[e] = broadcast32(xs + kAct.sub16[2 * (2 * m + e) + w / 4] + 4 * (w % 4));
        }
        for (int h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.codes[8 * m + w] + 32 * h));
          acc[0][h] =
              _mm256_add_epi16(acc[0][h], _mm256_maddubs_epi16(_mm256_and_si256(v, nibble), xe[0]));
          acc[1][h] = _mm256_add_epi16(
              acc[1][h],
              _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), nibble), xe[1]));
        }
      }
      const ScaleMinBytes sm = q4_k_scale_bytes(gc, m);
      for (int e = 0; e < 2; ++e) {
        const __m256i pair = broadcast32(xs + kAct.pair[2 * m + e]);
        for (int h = 0; h < 2; ++h) {
          total[h] =
              _mm256_add_epi32(total[h], _mm256_madd_epi16(acc[e][h], row_pairs(sm.scale[e], h)));
          min_total[h] =
              _mm256_add_epi32(min_total[h], _mm256_madd_epi16(row_pairs(sm.min[e], h), pair));
        }
      }
    }
    float dx;
    std::memcpy(&dx, xs + kActScalesOffset, sizeof dx);
    const __m256 vdx = _mm256_set1_ps(dx);
    for (int h = 0; h < 2; ++h) {
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.d + 8 * h)));
      const __m256 dmin =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gc.dmin + 8 * h)));
      sum[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, vdx), _mm256_cvtepi32_ps(total[h]), sum[h]);
      mins[h] =
          _mm256_fmadd_ps(_mm256_mul_ps(dmin, vdx), _mm256_cvtepi32_ps(min_total[h]), mins[h]);
    }
  }
  for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + 8 * h, _mm256_sub_ps(sum[h], mins[h]));
}

// Tiles of up to two tokens per group, each half of 8 rows through Half<T>; with One, a lone
// token through One(nb, group, x, y) instead.
template <typename Group, template <int> class Half,
          void (*One)(int64_t, const Group*, const uint8_t*, float*) = nullptr>
void gemm_groups(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                 int64_t nt, float* y, size_t ldy) {
  const auto* xb = static_cast<const uint8_t*>(x);
  for_each_group_tile<2>(ng, nt, [&](int64_t gi, int64_t t, auto tokens) {
    const auto* g =
        reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
    constexpr int T = decltype(tokens)::value;
    if constexpr (T == 1 && One != nullptr) {
      One(n / kQK_K, g, xb + t * ldx, y + t * ldy + gi * kGroupRows);
    } else {
      for (int h = 0; h < 2; ++h) {
        Half<T>::run(n / kQK_K, g, h, xb + t * ldx, ldx, y + t * ldy + gi * kGroupRows + 8 * h,
                     ldy);
      }
    }
  });
}

template <int T>
struct Q2_K {
  static void run(int64_t nb, const GroupQ2_K* g, int h, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    half_q2_k<T>(nb, g, h, x, ldx, y, ldy);
  }
};
template <int T>
struct Q4_K {
  static void run(int64_t nb, const GroupQ4_K* g, int h, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
    half_q4_k<T>(nb, g, h, x, ldx, y, ldy);
  }
};

}  // namespace

void set_row_group_kernels(Kernels& k) {
  k.q2_k.gemm_row_groups = gemm_groups<GroupQ2_K, Q2_K>;
  k.q4_k.gemm_row_groups = gemm_groups<GroupQ4_K, Q4_K, one_token_q4_k>;
  set_row_group_32_kernels(k);
  set_row_group_kquant_kernels(k);
}

}  // namespace hearth::cpu::avx2
