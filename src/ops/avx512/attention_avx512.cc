// AVX-512 attention tile: the AVX2 tile's results (../avx2/attention_avx2.cc), bit for bit, with
// each FMA over 16 lanes. At long contexts the AVX2 tile is bound by its FMAs; this one does half
// as many.
//
// Scores. The AVX2 tile sums a score in 8 lanes, lane l taking dims 8c + l over the chunks c in
// order, then folds the lanes by hsum's tree. Here a 512-bit vector holds two queries' 8 lanes
// against the same key chunk, widened once into both halves: a pair's vector of query chunks
// meets it by one FMA. hsum8x's tree is made of hadds, which work per 128-bit lane, so the same
// adds fold four pairs' vectors of one key at once, and two keys' results fill one vector. Eight
// keys' scores are then transposed into the queries' score rows.
//
// Values. An output element is a chain of FMAs over the keys in index order, at any vector
// width; here 16 dims a vector. The softmax exponentiates 16 scores a vector by the AVX2 exp_ps's
// operations and adds them to the AVX2 softmax's 8-lane sum half by half.
#include "ops/attention_tile.h"
#include "ops/avx2/attention_parts.h"
#include "ops/avx2/ops_avx2.h"
#include "ops/avx512/ops_avx512.h"
#include "ops/vec.h"

namespace hearth::ops_avx512 {
namespace {

using attention_detail::kMaxTileQueries;
using attention_detail::Tile;
using ops_avx2::dispatch_tile;
using ops_avx2::prefetch_row;
using ops_avx2::softmax_rows;

// Longest head whose query chunks the tile keeps on its stack; longer heads take the AVX2 tile.
constexpr int kMaxHeadDim = 256;
constexpr int kMaxPairs = kMaxTileQueries / 2;

inline const uint16_t* f16_at(const void* base, int64_t i) {
  return static_cast<const uint16_t*>(base) + i;
}

// Elements [i, i + 8) of a cache row, as floats in both 256-bit halves.
template <bool kF16>
inline __m512 chunk_twice(const void* base, int64_t i) {
  if constexpr (kF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f16_at(base, i)));
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(h));
  } else {
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(static_cast<const float*>(base) + i));
  }
}

// Elements [i, i + 16) of a cache row.
template <bool kF16>
inline __m512 load16(const void* base, int64_t i) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(f16_at(base, i))));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  }
}

// _mm256_hadd_ps in each 256-bit half: per 128-bit lane [a0 + a1, a2 + a3, b0 + b1, b2 + b3].
inline __m512 hadd(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
}

// One key's P pair vectors, folded as hsum8x folds: 128-bit lane 0 holds the even queries' sums
// of their lanes 0-3 (pair k in element k), lane 1 those of lanes 4-7, lanes 2 and 3 the same for
// the odd queries. Missing pairs repeat the last one.
template <int P>
inline __m512 fold(const __m512 (&a)[P]) {
  const __m512 t0 = hadd(a[0], a[P > 1 ? 1 : 0]);
  const __m512 t1 = P > 2 ? hadd(a[2], a[P > 3 ? 3 : 2]) : t0;
  return hadd(t0, t1);
}

// Two keys' folds to scale · score: [key a's 8 | key b's 8], element c of a key being query
// query_of_lane(c), lanes 0-3 plus lanes 4-7 as hsum adds its halves.
inline __m512 finish(__m512 ua, __m512 ub, __m512 scale) {
  const __m512 lo = _mm512_shuffle_f32x4(ua, ub, _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 hi = _mm512_shuffle_f32x4(ua, ub, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm512_mul_ps(_mm512_add_ps(lo, hi), scale);
}

// The query whose score a key's element c holds, or -1 where it repeats another's.
inline int query_of_lane(int c, int pairs, int n_q) {
  const int k = c % 4, i = 2 * k + c / 4;
  return k < pairs && i < n_q ? i : -1;
}

// Scores of keys j .. j + N - 1 (each capped at `last`) into blk[8 n + c] for key j + n.
// qp[4 c + k]: pair k's chunk c (query 2k in the low half, 2k + 1 in the high one).
template <int P, int N, bool kF16>
inline void score_keys(const Tile& t, const __m512* qp, int64_t j, int64_t last, __m512 scale,
                       float* blk) {
  static_assert(N % 2 == 0 && N * P <= 8);
  __m512 acc[N][P];
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < P; ++k) acc[n][k] = _mm512_setzero_ps();
  }
  int64_t row[N];
  for (int n = 0; n < N; ++n) row[n] = (j + n < last ? j + n : last) * t.row_stride;
  const int64_t ahead = t.prefetch_rows;
  if (ahead > 0 && j + N + ahead <= last) {
    for (int n = 0; n < N; ++n) prefetch_row<kF16>(t.k, row[n] + ahead * t.row_stride, t.head_dim);
  }
  const int chunks = t.head_dim / 8;
  for (int c = 0; c < chunks; ++c) {
    for (int n = 0; n < N; ++n) {
      const __m512 kv = chunk_twice<kF16>(t.k, row[n] + 8 * c);
      for (int k = 0; k < P; ++k) acc[n][k] = _mm512_fmadd_ps(qp[4 * c + k], kv, acc[n][k]);
    }
  }
  for (int n = 0; n < N; n += 2) {
    _mm512_store_ps(blk + 8 * n, finish(fold<P>(acc[n]), fold<P>(acc[n + 1]), scale));
  }
}

// ops_avx2::exp_ps on 16 lanes: the same operations, so the same bits in every lane.
inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);  // ln(FLT_MIN)
  const __m512 hi = _mm512_set1_ps(88.72283f);   // ln(FLT_MAX)
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  y = _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y,
                           _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

// ops_avx2::softmax_row, bit for bit: its keys first + 16m .. first + 16m + 15 exponentiated in
// one vector, whose halves go into the 8-lane sum in the order the AVX2 loop adds them; the last
// keys (fewer than 16) take the AVX2 row's own code.
float softmax_row(float* row, int64_t j0, int64_t first, int64_t n_vis, int64_t n_kv) {
  const int64_t n = n_vis - first;
  if (n < 16) return ops_avx2::softmax_row(row, j0, first, n_vis, n_kv);
  ops_avx2::clear_unseen(row, j0, first, n_vis, n_kv);
  float* const s = row + first;
  __m512 m = _mm512_loadu_ps(s);
  int64_t j = 16;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(_mm512_loadu_ps(s + j), m);
  float max = _mm512_reduce_max_ps(m);
  for (; j < n; ++j) max = s[j] > max ? s[j] : max;

  const __m512 vmax = _mm512_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j + 16 <= n; j += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vmax));
    _mm512_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
    sum = _mm256_add_ps(sum, _mm512_extractf32x8_ps(e, 1));
  }
  sum = ops_avx2::exp_sum_from(s, j, n, max, sum);
  return 1.0f / ops_avx2::hsum(sum);
}

// scores[i][j] = scale · q[i] · K[j] for every query and the keys j0 .. n_kv - 1 of the tile.
template <int P, bool kF16>
void scores(const Tile& t, const __m512* qp) {
  constexpr int N = P == 1 ? 8 : P == 2 ? 4 : 2;  // keys a step: 8 FMA chains in flight
  const int64_t n_kv = t.n_vis[t.n_q - 1], last = n_kv - 1;
  const __m512 scale = _mm512_set1_ps(t.scale);
  alignas(64) float blk[64];
  int lane_query[8];
  for (int c = 0; c < 8; ++c) lane_query[c] = query_of_lane(c, P, t.n_q);
  int64_t j = t.first[0];
  for (; j + 8 <= n_kv; j += 8) {
    for (int n = 0; n < 8; n += N) score_keys<P, N, kF16>(t, qp, j + n, last, scale, blk + 8 * n);
    __m256 r[8];
    for (int p = 0; p < 8; ++p) r[p] = _mm256_load_ps(blk + 8 * p);
    ops_avx2::transpose8(r);
    for (int c = 0; c < 8; ++c) {
      if (lane_query[c] >= 0) _mm256_storeu_ps(t.scores[lane_query[c]] + j, r[c]);
    }
  }
  if (j == n_kv) return;
  const int rest = static_cast<int>(n_kv - j);
  for (int n = 0; n < rest; n += 2) score_keys<P, 2, kF16>(t, qp, j + n, last, scale, blk + 8 * n);
  for (int c = 0; c < 8; ++c) {
    if (lane_query[c] < 0) continue;
    for (int n = 0; n < rest; ++n) t.scores[lane_query[c]][j + n] = blk[8 * n + c];
  }
}

// out[i][d0 .. d0 + 16C) = inv[i] · Σ_j p[i][j] · V[j][d0 ..], keys in index order.
template <int NQ, int C, bool kF16>
void value_block16(const Tile& t, int64_t j0, int64_t n_kv, int d0, const float* inv) {
  __m512 acc[NQ][C];
  for (int i = 0; i < NQ; ++i) {
    for (int c = 0; c < C; ++c) acc[i][c] = _mm512_setzero_ps();
  }
  for (int64_t j = j0; j < n_kv; ++j) {
    if (d0 == 0 && t.prefetch_rows > 0 && j + t.prefetch_rows < n_kv) {
      prefetch_row<kF16>(t.v, (j + t.prefetch_rows) * t.row_stride, t.head_dim);
    }
    __m512 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load16<kF16>(t.v, j * t.row_stride + d0 + 16 * c);
    for (int i = 0; i < NQ; ++i) {
      const __m512 p = _mm512_set1_ps(t.scores[i][j]);
      for (int c = 0; c < C; ++c) acc[i][c] = _mm512_fmadd_ps(p, vv[c], acc[i][c]);
    }
  }
  for (int i = 0; i < NQ; ++i) {
    const __m512 s = _mm512_set1_ps(inv[i]);
    for (int c = 0; c < C; ++c)
      _mm512_storeu_ps(t.out[i] + d0 + 16 * c, _mm512_mul_ps(acc[i][c], s));
  }
}

template <int NQ, bool kF16>
void tile_kernel(const Tile& t) {
  constexpr int P = (NQ + 1) / 2;
  const int hd = t.head_dim, chunks = hd / 8;
  // qp[4 c + k]: query 2k's dims [8c, 8c + 8) in the low half, query 2k + 1's (2k's again where
  // NQ is odd) in the high half.
  alignas(64) __m512 qp[kMaxHeadDim / 8 * kMaxPairs];
  for (int k = 0; k < P; ++k) {
    const float* a = t.q[2 * k];
    const float* b = t.q[2 * k + 1 < NQ ? 2 * k + 1 : 2 * k];
    for (int c = 0; c < chunks; ++c) {
      qp[4 * c + k] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a + 8 * c)),
                                         _mm256_loadu_ps(b + 8 * c), 1);
    }
  }
  scores<P, kF16>(t, qp);

  const int64_t n_kv = t.n_vis[NQ - 1], j0 = t.first[0];
  float inv[NQ];
  softmax_rows<NQ>(t, softmax_row, inv);

  // Output chunks of 16·C dims: NQ·C accumulators stay in registers across all keys.
  constexpr int C = NQ <= 4 ? 4 : 2;
  int d = 0;
  for (; d + 16 * C <= hd; d += 16 * C) value_block16<NQ, C, kF16>(t, j0, n_kv, d, inv);
  for (; d + 16 <= hd; d += 16) value_block16<NQ, 1, kF16>(t, j0, n_kv, d, inv);
  // A head that is an odd multiple of 8: the last 8 dims through the AVX2 pass.
  if (d < hd) ops_avx2::value_block<NQ, 1, kF16>(t, j0, n_kv, d, inv);
}

}  // namespace

void attention_tile(const Tile& t) {
  // A lone query would fill half of each vector; heads that are not whole chunks of 8 need the
  // AVX2 tile's scalar tails. Both give the same bits.
  if (t.n_q < 2 || t.head_dim % 8 != 0 || t.head_dim > kMaxHeadDim) {
    ops_avx2::attention_tile(t);
  } else {
    dispatch_tile(t, [&](auto nq, auto f16) { tile_kernel<decltype(nq)::value, f16>(t); });
  }
}

}  // namespace hearth::ops_avx512
