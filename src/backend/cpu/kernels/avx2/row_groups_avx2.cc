// The products over Q2_K row groups (kernels/row_groups.h) with AVX2: each 32-bit lane of a
// 256-bit vector is a row, a group taken as two halves of 8 rows (bytes 0-31 and 32-63 of each
// code vector). vpmaddubsw of a sub-block's codes (shifted down to 0..3) against four activation
// bytes broadcast gives each row two int16 partial sums, added over the sub-block's quads (at
// most 4 * 2 * 3 * 128: no saturation); vpmaddwd against the sub-block's scale in both halves of
// the row's lane then gives scale times the sub-block's sum, exactly. The mins meet the
// activations' sums of 16 by vpmaddwd too. The generic reference (generic/row_groups.cc) gives
// the same bits. The other types' AVX2 group kernels are templates shared with the AVX-VNNI
// table (row_groups_32_avx2.cc, row_groups_kquants_avx2.cc).
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/row_groups.h"
#include "backend/cpu/kernels/tile_set.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_columns.h"

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

// Tiles of up to two tokens per group, each half of 8 rows through Half<T>.
template <typename Group, template <int> class Half>
void gemm_groups(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                 int64_t nt, float* y, size_t ldy) {
  const auto* xb = static_cast<const uint8_t*>(x);
  for_each_group_tile<2>(ng, nt, [&](int64_t gi, int64_t t, auto tokens) {
    const auto* g =
        reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
    for (int h = 0; h < 2; ++h) {
      Half<decltype(tokens)::value>::run(n / kQK_K, g, h, xb + t * ldx, ldx,
                                         y + t * ldy + gi * kGroupRows + 8 * h, ldy);
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
}  // namespace

void set_row_group_kernels(Kernels& k) {
  k.q2_k.gemm_row_groups = gemm_groups<GroupQ2_K, Q2_K>;
  set_row_group_32_kernels(k);
  set_row_group_kquant_kernels(k);
}

}  // namespace hearth::cpu::avx2
