// What the AVX512-VNNI products over row groups (kernels/row_groups.h) share: the activation
// offsets, broadcasts, int16 pair packing, the one-token prefetch, a column's float finish, the
// tile driver and the prompts' driver over joined columns. Include only from files compiled with
// the avx512/ flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/avx512/avx512_util.h"
#include "backend/cpu/kernels/row_groups.h"
#include "backend/cpu/kernels/tile_set.h"

namespace hearth::cpu::avx512 {

// The activation offsets, evaluated at compile time: no out-of-line copy of act_layout.h's
// functions is built with these files' flags.
inline constexpr RowGroupActOffsets kAct = row_group_act_offsets();

inline __m512i broadcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// 3 << 2k in every byte: the 2-bit codes at bits 2k, left times 4^k.
inline __m512i crumb_mask(int k) { return _mm512_set1_epi8(static_cast<char>(3 << (2 * k))); }

// codes with bit k of each byte of h joined at bit 4 (codes' bit 4 clear). The 16-bit shifts carry
// bits across bytes only below bit 4 (left shifts of at most 4) or above it (right shifts of at
// most 3), which the mask drops.
inline __m512i join_bit_4(__m512i codes, __m512i h, int k) {
  const __m512i moved = k < 4    ? _mm512_slli_epi16(h, 4 - k)
                        : k == 4 ? h
                                 : _mm512_srli_epi16(h, k - 4);
  return _mm512_ternarylogic_epi32(codes, moved, _mm512_set1_epi8(0x10), 0xf8);  // a | (b & c)
}

// Two sub-blocks' int32 sums as the int16 pair (even, odd) in each 32-bit lane (both fit).
inline __m512i pack_pair(__m512i even, __m512i odd) {
  return _mm512_mask_blend_epi16(0xaaaaaaaa, even, _mm512_slli_epi32(odd, 16));
}

// One token streams the groups from DRAM, one forward stream (a matrix's groups lie one after
// another): each super-block column prefetches the bytes tiles::kStreamAhead on, as the row-major
// one-token tiles do.
template <typename Group>
inline void prefetch_ahead(const Group* gc) {
  tiles::prefetch_lines<sizeof(Group)>(reinterpret_cast<const char*>(gc) + tiles::kStreamAhead);
}

// acc[t] += f . (the activations' int16 sums of 16 of sub-blocks 2p and 2p + 1) for tokens t at
// x + t ldx (their activation super-blocks), one vpdpwssd a token: the offsets' or mins' term of
// a sub-block pair, f its two scales (or mins) as int16 pairs.
template <int T>
[[gnu::always_inline]] inline void add_pair_sums(__m512i (&acc)[T], __m512i f, const uint8_t* x,
                                                 size_t ldx, int p) {
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_dpwssd_epi32(acc[t], f, broadcast32(x + t * ldx + kAct.pair[p]));
  }
}

// A column's float term for groups without mins (Q3_K, Q6_K, IQ4_XS): sum[t] += (d dx_t) (a[t] -
// 2^OffsetShift b[t]) for tokens t at x + t ldx (their activation super-blocks), the codes' offset
// taken off exactly in int32 first.
template <int T, int OffsetShift>
[[gnu::always_inline]] inline void finish_column(__m512 d, const uint8_t* x, size_t ldx,
                                                 const __m512i (&a)[T], const __m512i (&b)[T],
                                                 __m512 (&sum)[T]) {
  for (int t = 0; t < T; ++t) {
    float dx;
    std::memcpy(&dx, x + t * ldx + kActScalesOffset, sizeof dx);
    const __m512i exact = _mm512_sub_epi32(a[t], _mm512_slli_epi32(b[t], OffsetShift));
    sum[t] =
        _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(exact), sum[t]);
  }
}

// The same for groups with mins (Q2_K, Q4_K, Q5_K): sum[t] += (d dx_t) a[t] and mins[t] +=
// (dmin dx_t) b[t]; a row's result is sum - mins once every column is in.
template <int T>
[[gnu::always_inline]] inline void finish_column_mins(__m512 d, __m512 dmin, const uint8_t* x,
                                                      size_t ldx, const __m512i (&a)[T],
                                                      const __m512i (&b)[T], __m512 (&sum)[T],
                                                      __m512 (&mins)[T]) {
  for (int t = 0; t < T; ++t) {
    float dx;
    std::memcpy(&dx, x + t * ldx + kActScalesOffset, sizeof dx);
    const __m512 vdx = _mm512_set1_ps(dx);
    sum[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, vdx), _mm512_cvtepi32_ps(a[t]), sum[t]);
    mins[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, vdx), _mm512_cvtepi32_ps(b[t]), mins[t]);
  }
}

// The super-block column loop of the group kernels: column(gc, xs, a, b) adds one column's integer
// sums for tokens xs[0..T) (their activation super-blocks) into a[t] and b[t], one row per lane.
// Groups with mins (a dmin field: Q2_K, Q4_K): a holds sum_j scale_j (codes . x), b sum_j min_j
// (sum of x), and a row's result is d dx a - dmin dx b, two running sums over the columns.
// Groups without (Q3_K, Q6_K): b holds sum_j scale_j (sum of x), and the result is the sum of
// d dx (a - 2^OffsetShift b) over the columns, the codes' offset taken off exactly.
template <int T, int OffsetShift, typename Group, typename Column>
[[gnu::always_inline]] inline void column_loop(int64_t nb, const Group* g, const uint8_t* x,
                                               size_t ldx, float* y, size_t ldy,
                                               const Column& column) {
  constexpr bool kMins = requires(const Group& gr) { gr.dmin; };
  __m512 sum[T] = {}, mins[T] = {};
  for (int64_t c = 0; c < nb; ++c) {
    const Group& gc = g[c];
    if constexpr (T == 1) prefetch_ahead(&gc);
    const uint8_t* xs[T];
    for (int t = 0; t < T; ++t) xs[t] = x + t * ldx + c * kActGroupBytes;
    __m512i a[T] = {}, b[T] = {};
    column(gc, xs, a, b);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.d)));
    if constexpr (kMins) {
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.dmin)));
      finish_column_mins<T>(d, dmin, xs[0], ldx, a, b, sum, mins);
    } else {
      finish_column<T, OffsetShift>(d, xs[0], ldx, a, b, sum);
    }
  }
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(y + t * ldy, kMins ? _mm512_sub_ps(sum[t], mins[t]) : sum[t]);
  }
}

// A prompt's product over groups whose columns are joined once per group (join(group, column))
// into a buffer of its own, which each tile of up to 4 tokens then reads column after column
// (Add<T>::run), the activation rows in order and the sums in registers: y[t * ldy + r].
template <typename Group, typename Column, template <int> class Add, typename Join>
void gemm_joined(int64_t n, const void* w, size_t ldw, int64_t ng, const uint8_t* xb, size_t ldx,
                 int64_t nt, float* y, size_t ldy, const Join& join) {
  const int64_t nb = n / kQK_K;
  std::vector<Column> cols(static_cast<size_t>(nb));
  for_each_unpacked_tile<4>(
      ng, nt, [](int64_t, int64_t, auto) {},
      [&](int64_t gi) {
        const auto* g =
            reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
        for (int64_t c = 0; c < nb; ++c) join(g[c], cols[c]);
      },
      [&](int64_t gi, int64_t t, auto tokens) {
        constexpr int T = decltype(tokens)::value;
        constexpr bool kMins = requires(const Column& col) { col.dmin; };
        __m512 sum[T] = {}, mins[T] = {};
        for (int64_t c = 0; c < nb; ++c) {
          Add<T>::run(cols[c], xb + t * ldx + c * kActGroupBytes, ldx, sum, mins);
        }
        float* yt = y + t * ldy + gi * kGroupRows;
        for (int i = 0; i < T; ++i) {
          _mm512_storeu_ps(yt + i * ldy, kMins ? _mm512_sub_ps(sum[i], mins[i]) : sum[i]);
        }
      });
}

// Tiles of up to MaxTokens per group through Kernel<T>, over n / Width columns.
template <typename Group, int MaxTokens, template <int> class Kernel, int64_t Width = kQK_K>
void gemm_groups(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                 int64_t nt, float* y, size_t ldy) {
  const auto* xb = static_cast<const uint8_t*>(x);
  for_each_group_tile<MaxTokens>(ng, nt, [&](int64_t gi, int64_t t, auto tokens) {
    const auto* g =
        reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
    Kernel<decltype(tokens)::value>::run(n / Width, g, xb + t * ldx, ldx,
                                         y + t * ldy + gi * kGroupRows, ldy);
  });
}

// Prompts through joined columns (gemm_joined), decode steps through the group kernel
// Direct<T>, which unpacks as it goes (so that they allocate nothing).
template <typename Group, typename Column, template <int> class Add, auto Join,
          template <int> class Direct>
void gemm_joined_prompts(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x,
                         size_t ldx, int64_t nt, float* y, size_t ldy) {
  if (unpack_codes(nt)) {
    gemm_joined<Group, Column, Add>(n, w, ldw, ng, static_cast<const uint8_t*>(x), ldx, nt, y, ldy,
                                    Join);
    return;
  }
  gemm_groups<Group, 4, Direct>(n, w, ldw, ng, x, ldx, nt, y, ldy);
}

}  // namespace hearth::cpu::avx512
