// The tile loop shared by the quant engine (quant_tiles.h: Q8_0, Q4_0) and the block engine
// (block_tiles.h: the other block types): an R x T tile walks its rows one activation group
// (8 blocks of 32) at a time, pads a last partial group with zero blocks, and sums each output's
// 8 lanes at the end. The engines differ only in how one group is accumulated. Include only from
// files compiled with AVX2/FMA/F16C.
#pragma once

#include <cstring>

#include "backend/cpu/kernels/act_layout.h"
#include "core/dtype.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// The tree of horizontal adds over one activation group's 4 pairs (act_layout.h), fed a pair's
// int32 products at a time (p = 0..3, unrolled so the level is known at compile time): `pending`
// holds the first pair of each half-group until its partner arrives, `half` the first
// half-group's hadd, and after pair 3 `sums` holds each block's integer sum in lane order.
[[gnu::always_inline]] inline void pair_tree_add(int p, __m256i v, __m256i& pending, __m256i& half,
                                                 __m256i& sums) {
  if (p % 2 == 0) {
    pending = v;
  } else if (p == 1) {
    half = _mm256_hadd_epi32(pending, v);
  } else {
    sums = _mm256_hadd_epi32(half, _mm256_hadd_epi32(pending, v));
  }
}

// E::Block, E::kGroupBlocks (blocks per activation group: 8, or 1 for a 256-weight super-block)
// and E::accumulate<R, T>(w, x, acc), which adds one group of R weight rows (pointers to the
// group's first byte) against T activation groups into the 8-lane accumulators.
template <typename E>
struct GroupTiles {
  using Block = typename E::Block;
  static constexpr size_t kGroupBytes = sizeof(Block) * E::kGroupBlocks;
  static constexpr int64_t kBlockWeights = kQK * kActGroupBlocks / E::kGroupBlocks;

  template <int R, int T>
  static void tile(int64_t n, const uint8_t* const* w, const uint8_t* const* ahead,
                   const uint8_t* x, size_t ldx, float* y, size_t ldy) {
    const int64_t full = n / (kQK * kActGroupBlocks);
    // Where each row and token is up to: advanced one group at a time.
    const uint8_t* wg[R];
    const uint8_t* next[R];
    const uint8_t* xg[T];
    std::memcpy(wg, w, sizeof wg);
    std::memcpy(next, ahead, sizeof next);
    for (int t = 0; t < T; ++t) xg[t] = x + t * ldx;
    __m256 acc[R][T] = {};
    // One token streams its weights from DRAM. A single row of a forward stream prefetches
    // tiles::kStreamAhead bytes on, group by group; otherwise each group prefetches its
    // counterpart in the row read after this one (`ahead`, see TileSet::gemv), so a scattered
    // gathered row is on its way before its tile starts.
    const int64_t row_bytes = n / kBlockWeights * static_cast<int64_t>(sizeof(Block));
    const bool stream = T == 1 && R == 1 && tiles::is_forward_stream(w[0], ahead[0], row_bytes);
    for (int64_t g = 0; g < full; ++g) {
      if constexpr (T == 1) {
        for (int r = 0; r < R; ++r) {
          const uint8_t* fetch = stream ? wg[r] + tiles::kStreamAhead : next[r];
          tiles::prefetch_lines<kGroupBytes>(fetch);
          next[r] += kGroupBytes;
        }
      }
      E::template accumulate<R, T>(wg, xg, acc);
      for (int r = 0; r < R; ++r) wg[r] += kGroupBytes;
      for (int t = 0; t < T; ++t) xg[t] += kActGroupBytes;
    }
    if constexpr (E::kGroupBlocks > 1) {
      const int rest = static_cast<int>(n / kQK - full * kActGroupBlocks);
      if (rest > 0) {
        // The activation row is zero-padded to whole groups; zero blocks (zero scales, zero
        // codes against zero quants) pad the weights to match and add exactly nothing.
        Block padded[R][E::kGroupBlocks];
        std::memset(padded, 0, sizeof padded);
        const uint8_t* wp[R];
        for (int r = 0; r < R; ++r) {
          std::memcpy(padded[r], wg[r], static_cast<size_t>(rest) * sizeof(Block));
          wp[r] = reinterpret_cast<const uint8_t*>(padded[r]);
        }
        E::template accumulate<R, T>(wp, xg, acc);
      }
    }
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) y[t * ldy + r] = hsum(acc[r][t]);
    }
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
