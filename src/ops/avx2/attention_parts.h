// Pieces of the attention tile kernels that the AVX2 tile (attention_avx2.cc) and the AVX-512 one
// (../avx512/attention_avx512.cc) share, so that both give every query the same bits: the
// softmax of the score rows, the 8-wide value pass, the prefetch of K/V rows and the dispatch over
// a tile's shape. Include only from files under an avx2/ or avx512/ folder.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/attention_tile.h"
#include "ops/avx2/simd.h"
#include "ops/vec.h"

namespace hearth::ops_avx2 {
inline namespace HEARTH_OPS_AVX2_ABI {

// n elements of a cache row from element i on. Rows of one head are row_stride elements apart:
// head_dim in a head-major cache, n_head_kv · head_dim in a position-major one, a stride the
// hardware prefetchers follow poorly. A value pass prefetches whole rows in its first pass over
// the output dims: the later passes read the rest of those lines from cache.
template <bool kF16>
inline void prefetch_row(const void* base, int64_t i, int n) {
  constexpr int kElem = kF16 ? 2 : 4;
  const char* p = static_cast<const char*>(base) + i * kElem;
  for (int b = 0; b < n * kElem; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

// Elements [i, i + 8) of a cache row as floats.
template <bool kF16>
inline __m256 load8(const void* base, int64_t i) {
  if constexpr (kF16) {
    return load_f16x8(static_cast<const uint16_t*>(base) + i);
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
  }
}

// out[i][d0 .. d0 + 8C) = inv[i] · Σ_j p[i][j] · V[j][d0 ..], accumulating keys in index order.
template <int NQ, int C, bool kF16>
inline void value_block(const attention_detail::Tile& t, int64_t j0, int64_t n_kv, int d0,
                        const float* inv) {
  __m256 acc[NQ][C];
  for (int i = 0; i < NQ; ++i) {
    for (int c = 0; c < C; ++c) acc[i][c] = _mm256_setzero_ps();
  }
  for (int64_t j = j0; j < n_kv; ++j) {
    if (d0 == 0 && t.prefetch_rows > 0 && j + t.prefetch_rows < n_kv) {
      prefetch_row<kF16>(t.v, (j + t.prefetch_rows) * t.row_stride, t.head_dim);
    }
    __m256 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load8<kF16>(t.v, j * t.row_stride + d0 + 8 * c);
    for (int i = 0; i < NQ; ++i) {
      const __m256 p = _mm256_broadcast_ss(t.scores[i] + j);
      for (int c = 0; c < C; ++c) acc[i][c] = _mm256_fmadd_ps(p, vv[c], acc[i][c]);
    }
  }
  for (int i = 0; i < NQ; ++i) {
    const __m256 s = _mm256_set1_ps(inv[i]);
    for (int c = 0; c < C; ++c)
      _mm256_storeu_ps(t.out[i] + d0 + 8 * c, _mm256_mul_ps(acc[i][c], s));
  }
}

// Zeroes a score row's keys that the tile computed but its query does not see: [j0, first) and
// [n_vis, n_kv).
inline void clear_unseen(float* row, int64_t j0, int64_t first, int64_t n_vis, int64_t n_kv) {
  for (int64_t j = j0; j < first; ++j) row[j] = 0.0f;
  for (int64_t j = n_vis; j < n_kv; ++j) row[j] = 0.0f;
}

// s[j .. n) = e^(s - max), 8 at a time and a masked tail, each vector added to sum in turn.
inline __m256 exp_sum_from(float* s, int64_t j, int64_t n, float max, __m256 sum) {
  const __m256 vmax = _mm256_set1_ps(max);
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), vmax));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (j < n) {
    const __m256i mask = tail_mask(static_cast<int>(n - j));
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(s + j, mask), vmax)),
                                   _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(s + j, mask, e);
    sum = _mm256_add_ps(sum, e);
  }
  return sum;
}

// s[first .. n_vis) = e^(s - max s), the row's other keys from j0 to n_kv zeroed; returns 1 / Σ.
// The visible keys of a row are s[first ..], read as a row of their own: lane l of the sum takes
// the keys first + l (mod 8), added in order, and hsum's tree folds the lanes.
inline float softmax_row(float* row, int64_t j0, int64_t first, int64_t n_vis, int64_t n_kv) {
  clear_unseen(row, j0, first, n_vis, n_kv);
  const float* s = row + first;
  const int64_t n = n_vis - first;
  float max = s[0];
  int64_t j = 0;
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(s);
    for (j = 8; j + 8 <= n; j += 8) m = _mm256_max_ps(_mm256_loadu_ps(s + j), m);
    max = hmax(m);
  }
  for (; j < n; ++j) max = s[j] > max ? s[j] : max;
  return 1.0f / hsum(exp_sum_from(row + first, 0, n, max, _mm256_setzero_ps()));
}

// The softmax of each query's score row (soft-capped first where the model caps scores), over the
// tile's keys j0 .. n_kv - 1: inv[i] = 1 / Σ of query i's row.
template <int NQ, typename Softmax>
inline void softmax_rows(const attention_detail::Tile& t, const Softmax& softmax, float* inv) {
  const int64_t n_kv = t.n_vis[NQ - 1], j0 = t.first[0];
  for (int i = 0; i < NQ; ++i) {
    if (t.softcap > 0.0f) {
      vec_soft_cap(t.scores[i] + t.first[i], t.softcap, t.n_vis[i] - t.first[i]);
    }
    inv[i] = softmax(t.scores[i], j0, t.first[i], t.n_vis[i], n_kv);
  }
}

// kernel(std::integral_constant<int, NQ>, std::bool_constant<F16>) for the tile's query count and
// cache type: the tile kernels' instantiations.
template <typename Kernel>
inline void dispatch_tile(const attention_detail::Tile& t, const Kernel& kernel) {
  const auto with_type = [&](auto nq) {
    if (t.f16) {
      kernel(nq, std::true_type{});
    } else {
      kernel(nq, std::false_type{});
    }
  };
  switch (t.n_q) {
    case 1:
      return with_type(std::integral_constant<int, 1>{});
    case 2:
      return with_type(std::integral_constant<int, 2>{});
    case 3:
      return with_type(std::integral_constant<int, 3>{});
    case 4:
      return with_type(std::integral_constant<int, 4>{});
    case 5:
      return with_type(std::integral_constant<int, 5>{});
    case 6:
      return with_type(std::integral_constant<int, 6>{});
    case 7:
      return with_type(std::integral_constant<int, 7>{});
    default:
      return with_type(std::integral_constant<int, 8>{});
  }
}

}  // namespace HEARTH_OPS_AVX2_ABI
}  // namespace hearth::ops_avx2
