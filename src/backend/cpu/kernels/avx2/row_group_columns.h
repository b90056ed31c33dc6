// The gemm_row_groups driver shared by the 256-bit kernels over 256-weight group columns whose
// codes come as 8 x 8 x 2 vectors a column (row_group_k32_tiles.h, row_group_sub16_tiles.h): a
// 32-weight (or 32-block) index a, a quad w and a row half h. Include only from files compiled
// with AVX2/FMA/F16C.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/row_groups.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// Four bytes at p in every 32-bit lane: an activation quad (or int16 pair) against every row.
inline __m256i broadcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// acc[t] += f . (the int16 pair at pair_offset of token t's activation super-block xs[t]), one
// vpmaddwd a token: a row's int16 pair of factors (mins, or scales times an offset) against the
// sums of 16 of a 32-block's two sub-blocks.
template <int T>
void add_pair_sums(__m256i f, const uint8_t* const (&xs)[T], int64_t pair_offset,
                   __m256i (&acc)[T]) {
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(f, broadcast32(xs[t] + pair_offset)));
  }
}

// One token streams the groups from DRAM, one forward stream: each column prefetches the bytes
// tiles::kStreamAhead on.
template <typename Group>
void prefetch_column(const Group& gc) {
  tiles::prefetch_lines<sizeof(Group)>(reinterpret_cast<const char*>(&gc) + tiles::kStreamAhead);
}

// A column's float term for tokens xs[0..T) (their activation super-blocks): sum[h][t] +=
// (f_r dx_t) v[h][t] for the rows r of half h, f the column's f16 factors (d or dmin), in the
// reference's operation order. With Quarter, v holds 4 times the reference's sums: converted and
// scaled by 1/4, both exact, they are the reference's floats again.
template <int T, bool Quarter = false>
void add_column_term(const uint16_t* f, const uint8_t* const (&xs)[T], const __m256i (&v)[2][T],
                     __m256 (&sum)[2][T]) {
  for (int h = 0; h < 2; ++h) {
    const __m256 fh = load_f16x8(f + 8 * h);
    for (int t = 0; t < T; ++t) {
      float dx;
      std::memcpy(&dx, xs[t] + kActScalesOffset, sizeof dx);
      __m256 vf = _mm256_cvtepi32_ps(v[h][t]);
      if constexpr (Quarter) vf = _mm256_mul_ps(vf, _mm256_set1_ps(0.25f));
      sum[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(fh, _mm256_set1_ps(dx)), vf, sum[h][t]);
    }
  }
}

// Kernel::codes(gc, a, w, h) gives the codes of column gc; Kernel::run<T>(nb, g, x, ldx, y, ldy,
// codes_of) takes tokens x[0..T) against one group, codes_of(c, a, w, h) giving column c's codes.
// Up to MaxTokens tokens (decode steps) unpack the codes as they stream them; more (prompts)
// unpack each group's codes once per call into a buffer (4 KiB a column: (c, a, w, h) at vector
// 128 c + 16 a + 2 w + h; for_each_unpacked_tile) that tiles of up to MaxTokens read.
template <typename Kernel, typename Group, int MaxTokens>
void gemm_column_codes(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                       int64_t nt, float* y, size_t ldy) {
  const int64_t nb = n / kQK_K;
  const auto* xb = static_cast<const uint8_t*>(x);
  const auto group = [&](int64_t gi) {
    return reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
  };
  std::vector<uint8_t> buffer(unpack_codes(nt) ? static_cast<size_t>(nb) * 128 * sizeof(__m256i)
                                               : 0);
  auto* unpacked = reinterpret_cast<__m256i*>(buffer.data());
  const auto unpack = [&](int64_t gi) {
    const Group* g = group(gi);
    for (int64_t c = 0; c < nb; ++c) {
      for (int a = 0; a < 8; ++a) {
        for (int q = 0; q < 8; ++q) {
          for (int h = 0; h < 2; ++h) {
            _mm256_storeu_si256(unpacked + 128 * c + 16 * a + 2 * q + h,
                                Kernel::codes(g[c], a, q, h));
          }
        }
      }
    }
  };
  for_each_unpacked_tile<MaxTokens>(
      ng, nt,
      [&](int64_t gi, int64_t t, auto tokens) {
        const Group* g = group(gi);
        Kernel::template run<decltype(tokens)::value>(
            nb, g, xb + t * ldx, ldx, y + t * ldy + gi * kGroupRows, ldy,
            [&](int64_t c, int a, int q, int h) { return Kernel::codes(g[c], a, q, h); });
      },
      unpack,
      [&](int64_t gi, int64_t t, auto tokens) {
        Kernel::template run<decltype(tokens)::value>(
            nb, group(gi), xb + t * ldx, ldx, y + t * ldy + gi * kGroupRows, ldy,
            [&](int64_t c, int a, int q, int h) {
              return _mm256_loadu_si256(unpacked + 128 * c + 16 * a + 2 * q + h);
            });
      });
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
