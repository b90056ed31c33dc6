// Internal to ops/attention: one unit of attention work, a "tile" of up to kMaxTileQueries queries
// that read the same KV head. attention.cc cuts the (token, head) pairs into tiles and hands each
// to the scalar or the AVX2 tile kernel.
#pragma once

#include <cstdint>

namespace hearth::attention_detail {

// A decode step's queries of one KV head (8 for most grouped-query models) fit one tile, which
// then reads each of the head's K/V rows once.
inline constexpr int kMaxTileQueries = 8;

struct Tile {
  int n_q = 0;                           // queries in this tile, 1..kMaxTileQueries
  const float* q[kMaxTileQueries] = {};  // [head_dim] each
  float* out[kMaxTileQueries] = {};      // [head_dim] each
  int64_t n_vis[kMaxTileQueries] = {};   // keys query i sees end at n_vis - 1; nondecreasing in i
  int64_t first[kMaxTileQueries] = {};   // and start at first (a sliding window); nondecreasing
  float* scores[kMaxTileQueries] = {};   // workspace, [n_vis[n_q - 1]] each
  const void* k = nullptr;               // element (pos j, dim d) at k[j * row_stride + d]
  const void* v = nullptr;               // same layout as k
  int64_t row_stride = 0;                // n_head_kv * head_dim
  int head_dim = 0;
  float scale = 0.0f;
  float softcap = 0.0f;   // AttentionParams::softcap (vec_soft_cap before the softmax)
  bool f16 = false;       // cache elements are F16 (else F32)
  int64_t prefetch_rows = 0;  // K/V rows come from memory (few query tokens): fetch this many
                              // rows ahead of use; 0: they are likely in cache, fetch nothing
};

}  // namespace hearth::attention_detail

namespace hearth::ops_avx2 {

// AVX2 tile kernel (attention_avx2.cc).
void attention_tile(const attention_detail::Tile& tile);

}  // namespace hearth::ops_avx2
