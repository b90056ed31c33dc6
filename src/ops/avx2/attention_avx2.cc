// AVX2 attention tile: scores for NQ queries (1..8) against the keys they see, softmax, then the
// weighted sum of V rows, with register blocking so each K/V chunk loaded (and, for F16, widened)
// once serves every query of the tile.
//
// Thread-count independence: how queries are grouped into tiles depends on the thread count, so
// every query's arithmetic is made independent of the grouping: each dot product accumulates the
// same 8-wide chunks in the same order and is reduced with the same tree (hsum/hsum8x), each output
// element accumulates keys in index order, and tails use the same scalar code for every NQ.
#include "ops/attention_tile.h"
#include "ops/avx2/attention_parts.h"
#include "ops/avx2/ops_avx2.h"
#include "ops/avx2/simd.h"
#include "ops/vec.h"

namespace hearth::ops_avx2 {
namespace {

using attention_detail::Tile;

template <bool kF16>
inline float load1(const void* base, int64_t i) {
  if constexpr (kF16) {
    return _cvtsh_ss(static_cast<const uint16_t*>(base)[i]);
  } else {
    return static_cast<const float*>(base)[i];
  }
}

// Keys per score block: NQ · NK = 8 dot products in flight (NQ up to 4; more queries take one key
// at a time), enough to hide the FMA latency and exactly one hsum8x.
template <int NQ>
constexpr int kKeysPerBlock = NQ == 1   ? 8
                              : NQ == 2 ? 4
                              : NQ <= 4 ? 2
                                        : 1;

// Lane i·NK + k: q[i] · K[j0 + k] over the whole chunks of 8 dims, for i < NQ, k < NK (lanes
// past NQ·NK hold 0).
template <int NQ, int NK, bool kF16>
inline __m256 chunk_sums(const Tile& t, int64_t j0) {
  static_assert(NQ * NK <= 8);
  __m256 acc[8];
  for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
  const int hd = t.head_dim;
  const int64_t ahead = t.prefetch_rows;
  if (ahead > 0 && j0 + NK + ahead <= t.n_vis[NQ - 1]) {
    for (int k = 0; k < NK; ++k) prefetch_row<kF16>(t.k, (j0 + k + ahead) * t.row_stride, hd);
  }
  for (int d = 0; d + 8 <= hd; d += 8) {
    __m256 qv[NQ];
    for (int i = 0; i < NQ; ++i) qv[i] = _mm256_loadu_ps(t.q[i] + d);
    for (int k = 0; k < NK; ++k) {
      const __m256 kv = load8<kF16>(t.k, (j0 + k) * t.row_stride + d);
      for (int i = 0; i < NQ; ++i) acc[i * NK + k] = _mm256_fmadd_ps(qv[i], kv, acc[i * NK + k]);
    }
  }
  return hsum8x(acc);
}

// scores[i][j0 + k] = scale · q[i] · K[j0 + k] for i < NQ, k < NK; a head_dim's last dims past
// the whole chunks added one by one after the fold.
template <int NQ, int NK, bool kF16>
void score_block(const Tile& t, int64_t j0) {
  alignas(32) float sums[8];
  _mm256_store_ps(sums, chunk_sums<NQ, NK, kF16>(t, j0));
  for (int d = t.head_dim / 8 * 8; d < t.head_dim; ++d) {
    for (int k = 0; k < NK; ++k) {
      const float kd = load1<kF16>(t.k, (j0 + k) * t.row_stride + d);
      for (int i = 0; i < NQ; ++i)
        sums[i * NK + k] = __builtin_fmaf(t.q[i][d], kd, sums[i * NK + k]);
    }
  }
  for (int i = 0; i < NQ; ++i) {
    for (int k = 0; k < NK; ++k) t.scores[i][j0 + k] = sums[i * NK + k] * t.scale;
  }
}

// score_block over keys j0 .. j0 + 7 of a head that is whole chunks of 8: the 8 / NK blocks'
// lanes rearranged into each query's 8 scores, one vector store a query.
template <int NQ, int NK, bool kF16>
void score_keys8(const Tile& t, int64_t j0) {
  __m256 r[8];
  for (int b = 0; b < 8 / NK; ++b) r[b] = chunk_sums<NQ, NK, kF16>(t, j0 + NK * b);
  // r[b] lane i·NK + k is key NK·b + k of query i: row i gathers lanes [i·NK, i·NK + NK) of
  // every block.
  if constexpr (NK == 1) {
    transpose8(r);
  } else if constexpr (NK == 2) {
    __m256d u[4];
    for (int b = 0; b < 4; b += 2) {
      u[b] = _mm256_unpacklo_pd(_mm256_castps_pd(r[b]), _mm256_castps_pd(r[b + 1]));
      u[b + 1] = _mm256_unpackhi_pd(_mm256_castps_pd(r[b]), _mm256_castps_pd(r[b + 1]));
    }
    for (int i = 0; i < 2; ++i) {
      r[i] = _mm256_castpd_ps(_mm256_permute2f128_pd(u[i], u[i + 2], 0x20));
      r[i + 2] = _mm256_castpd_ps(_mm256_permute2f128_pd(u[i], u[i + 2], 0x31));
    }
  } else if constexpr (NK == 4) {
    const __m256 r0 = r[0];
    r[0] = _mm256_permute2f128_ps(r0, r[1], 0x20);
    r[1] = _mm256_permute2f128_ps(r0, r[1], 0x31);
  }
  const __m256 scale = _mm256_set1_ps(t.scale);
  for (int i = 0; i < NQ; ++i) _mm256_storeu_ps(t.scores[i] + j0, _mm256_mul_ps(r[i], scale));
}

template <int NQ, bool kF16>
void tile_kernel(const Tile& t) {
  // Keys j0 .. n_kv - 1 are visible to some query of the tile; the others' scores are zeroed.
  const int64_t n_kv = t.n_vis[NQ - 1], j0 = t.first[0];
  constexpr int NK = kKeysPerBlock<NQ>;
  int64_t j = j0;
  if (t.head_dim % 8 == 0) {
    for (; j + 8 <= n_kv; j += 8) score_keys8<NQ, NK, kF16>(t, j);
  }
  for (; j + NK <= n_kv; j += NK) score_block<NQ, NK, kF16>(t, j);
  for (; j < n_kv; ++j) score_block<NQ, 1, kF16>(t, j);

  float inv[NQ];
  softmax_rows<NQ>(t, softmax_row, inv);

  // Output chunks of 8·C dims: NQ·C accumulators stay in registers across all keys.
  constexpr int C = NQ == 1 ? 8 : NQ == 2 ? 4 : NQ <= 4 ? 2 : 1;
  const int hd = t.head_dim;
  int d = 0;
  for (; d + 8 * C <= hd; d += 8 * C) value_block<NQ, C, kF16>(t, j0, n_kv, d, inv);
  for (; d + 8 <= hd; d += 8) value_block<NQ, 1, kF16>(t, j0, n_kv, d, inv);
  for (; d < hd; ++d) {
    for (int i = 0; i < NQ; ++i) {
      float acc = 0.0f;
      for (int64_t jj = j0; jj < n_kv; ++jj) {
        acc = __builtin_fmaf(t.scores[i][jj], load1<kF16>(t.v, jj * t.row_stride + d), acc);
      }
      t.out[i][d] = acc * inv[i];
    }
  }
}

}  // namespace

void attention_tile(const Tile& t) {
  dispatch_tile(t, [&](auto nq, auto f16) { tile_kernel<decltype(nq)::value, f16>(t); });
}

}  // namespace hearth::ops_avx2
