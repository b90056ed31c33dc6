#include "ops/attention.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "ops/attention_tile.h"
#include "ops/avx2/ops_avx2.h"
#include "ops/avx512/ops_avx512.h"
#include "ops/vec.h"

namespace hearth {
namespace {

using attention_detail::kMaxTileQueries;
using attention_detail::Tile;

// Score rows start on a cache line of their own so threads never share one.
constexpr int64_t kScoreAlign = 16;  // floats

// Batches of fewer query tokens than this prefetch K/V rows ahead of use, at least
// kPrefetchMinRows rows and about kPrefetchBytes of a head's rows ahead: a tile streams its KV
// head's rows on one core, whose misses in flight set the pace (too few at 12 rows of 128 bytes).
constexpr int64_t kPrefetchMaxTokens = 8;
constexpr int64_t kPrefetchMinRows = 12;
constexpr int64_t kPrefetchBytes = 8192;

int64_t score_row_floats(int64_t n_ctx) {
  return (n_ctx + kScoreAlign - 1) / kScoreAlign * kScoreAlign;
}

float cache_elem(const void* base, bool f16, int64_t i) {
  return f16 ? fp16_to_fp32(static_cast<const uint16_t*>(base)[i])
             : static_cast<const float*>(base)[i];
}

// Scalar reference kernel: each query on its own, plain float loops in index order.
void attention_tile_scalar(const Tile& t) {
  const int hd = t.head_dim;
  for (int i = 0; i < t.n_q; ++i) {
    const float* q = t.q[i];
    float* s = t.scores[i];
    const int64_t n = t.n_vis[i], j0 = t.first[i];
    float max = -INFINITY;
    for (int64_t j = j0; j < n; ++j) {
      const int64_t row = j * t.row_stride;
      float dot = 0.0f;
      for (int d = 0; d < hd; ++d) dot += q[d] * cache_elem(t.k, t.f16, row + d);
      s[j] = dot * t.scale;
    }
    if (t.softcap > 0.0f) vec_soft_cap(s + j0, t.softcap, n - j0);
    for (int64_t j = j0; j < n; ++j) max = s[j] > max ? s[j] : max;
    float sum = 0.0f;
    for (int64_t j = j0; j < n; ++j) {
      s[j] = std::exp(s[j] - max);
      sum += s[j];
    }
    float* out = t.out[i];
    for (int d = 0; d < hd; ++d) out[d] = 0.0f;
    for (int64_t j = j0; j < n; ++j) {
      const int64_t row = j * t.row_stride;
      for (int d = 0; d < hd; ++d) out[d] += s[j] * cache_elem(t.v, t.f16, row + d);
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; ++d) out[d] *= inv;
  }
}

int elem_bytes(DType t) { return t == DType::F16 ? 2 : 4; }

}  // namespace

size_t kv_cache_bytes(const AttentionParams& p) {
  return static_cast<size_t>(p.n_ctx) * p.n_head_kv * p.head_dim * elem_bytes(p.kv_type);
}

void kv_store(cpu::Isa isa, const AttentionParams& p, const float* src, int64_t src_stride,
              int64_t pos0, int64_t n_tokens, void* cache) {
  assert(p.kv_type == DType::F32 || p.kv_type == DType::F16);
  assert(pos0 >= 0 && pos0 + n_tokens <= p.n_ctx);
  const int64_t row = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
  if (src_stride == 0) src_stride = row;
  // A position's heads are one run in a position-major cache, one run each in a head-major one.
  const int runs = p.head_major ? p.n_head_kv : 1;
  const int64_t run = row / runs;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < runs; ++h) {
      const float* s = src + t * src_stride + h * run;
      const int64_t at = kv_index(p, pos0 + t, h, 0);
      if (p.kv_type == DType::F32) {
        std::memcpy(static_cast<float*>(cache) + at, s, run * sizeof(float));
        continue;
      }
      uint16_t* d = static_cast<uint16_t*>(cache) + at;
      if (ops_avx2::enabled(isa)) {
        ops_avx2::f32_to_f16(s, d, run);
      } else {
        for (int64_t i = 0; i < run; ++i) d[i] = fp32_to_fp16(s[i]);
      }
    }
  }
}

size_t attention_workspace_bytes(const AttentionParams& p, int n_threads) {
  return static_cast<size_t>(n_threads) * kMaxTileQueries * score_row_floats(p.n_ctx) *
         sizeof(float);
}

void attention(cpu::CpuContext& ctx, const AttentionParams& p, const float* q, const void* k_cache,
               const void* v_cache, int64_t pos0, int64_t n_tokens, float* out, void* workspace) {
  assert(p.kv_type == DType::F32 || p.kv_type == DType::F16);
  assert(p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
  assert(pos0 >= 0 && n_tokens >= 0 && pos0 + n_tokens <= p.n_ctx);
  assert(reinterpret_cast<uintptr_t>(workspace) % 64 == 0);
  if (n_tokens == 0) return;

  const int group = p.n_head / p.n_head_kv;
  const int hd = p.head_dim;
  const int64_t per_kv = n_tokens * group;  // queries reading each KV head
  const int n_threads = ctx.n_threads();
  // Bigger tiles re-use each K/V row more, but the tiles must still keep every thread busy.
  int tile_q = kMaxTileQueries;
  while (tile_q > 1 && p.n_head_kv * ((per_kv + tile_q - 1) / tile_q) < n_threads) tile_q /= 2;
  const int64_t tiles_per_kv = (per_kv + tile_q - 1) / tile_q;
  const int64_t n_items = p.n_head_kv * tiles_per_kv;

  // Between one position's row of a KV head and the next.
  const int64_t row_stride = kv_index(p, 1, 0, 0);
  const int64_t q_stride = static_cast<int64_t>(p.n_head) * hd;
  const int64_t score_floats = score_row_floats(p.n_ctx);
  const float scale = p.scale != 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const bool f16 = p.kv_type == DType::F16;
  void (*const tile_kernel)(const Tile&) = ops_avx512::enabled(ctx.isa())
                                               ? ops_avx512::attention_tile
                                           : ops_avx2::enabled(ctx.isa()) ? ops_avx2::attention_tile
                                                                          : attention_tile_scalar;
  const int elem = elem_bytes(p.kv_type);
  // With a few query tokens each K/V row is used by one or two tiles, so it comes from memory:
  // about kPrefetchBytes of a head's rows ahead keep enough lines in flight to stream them.
  const int64_t prefetch_rows =
      n_tokens < kPrefetchMaxTokens
          ? std::max<int64_t>(kPrefetchMinRows, kPrefetchBytes / (static_cast<int64_t>(hd) * elem))
          : 0;

  // Tiles are handed out one at a time: causal work grows with the token index, so a static split
  // would leave the threads with the early tokens idle. Items go KV head by KV head, so that the
  // threads share one head's K/V rows while they are hot in cache, and within a head
  // latest-tokens-first, so that the cheap tiles fill the gaps at the end.
  std::atomic<int64_t> next{0};
  ctx.pool().run([&](int ith, int nth) {
    float* scores =
        static_cast<float*>(workspace) + static_cast<int64_t>(ith) * kMaxTileQueries * score_floats;
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= n_items) break;
      const int kvh = static_cast<int>(item / tiles_per_kv);
      const int64_t tile_idx = tiles_per_kv - 1 - item % tiles_per_kv;
      Tile t;
      t.k = static_cast<const char*>(k_cache) + kv_index(p, 0, kvh, 0) * elem;
      t.v = static_cast<const char*>(v_cache) + kv_index(p, 0, kvh, 0) * elem;
      t.row_stride = row_stride;
      t.head_dim = hd;
      t.scale = scale;
      t.softcap = p.softcap;
      t.f16 = f16;
      t.prefetch_rows = prefetch_rows;
      const int64_t f_end = (tile_idx + 1) * tile_q < per_kv ? (tile_idx + 1) * tile_q : per_kv;
      for (int64_t f = tile_idx * tile_q; f < f_end; ++f) {
        const int64_t tok = f / group;
        const int h = kvh * group + static_cast<int>(f % group);
        const int i = t.n_q++;
        t.q[i] = q + tok * q_stride + static_cast<int64_t>(h) * hd;
        t.out[i] = out + tok * q_stride + static_cast<int64_t>(h) * hd;
        t.n_vis[i] = pos0 + tok + 1;
        t.first[i] = p.window > 0 && t.n_vis[i] > p.window ? t.n_vis[i] - p.window : 0;
        t.scores[i] = scores + i * score_floats;
      }
      tile_kernel(t);
    }
  });
}

}  // namespace hearth
