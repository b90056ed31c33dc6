// Register-blocked FMA tiles of F32 activations against float weight rows (F32, F16, BF16),
// written once for every vector width. Each weight vector is converted once per tile and meets T
// activation rows; each activation vector meets R weight rows.
//
// V supplies the vectors of one ISA and weight type:
//   V::Vec, V::kLanes                 a vector of kLanes floats
//   V::kWeightBytes                   bytes of one weight column
//   V::zero(), V::fma(a, b, c)        a * b + c, one rounding
//   V::weights(row, i)                elements i.. of a weight row, converted to floats
//   V::weights_tail(row, i, count)    the last count < kLanes of them, zero-padded
//   V::acts(x, i), V::acts_tail(x, i, count)   the same for an F32 activation row
//   V::save(p, v), V::restore(p)      a vector to / from kLanes aligned floats
//   V::sum(v)                         the lanes added in a fixed order
// Include after the ISA's intrinsics are enabled; instantiate only with a V private to one
// translation unit or ISA namespace (see tile_set.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels/span_tiles.h"
#include "backend/cpu/kernels/tile_set.h"

namespace hearth::cpu::tiles {

template <typename V>
struct FloatTiles {
  using Vec = typename V::Vec;
  static constexpr int kLanes = V::kLanes;
  static constexpr int64_t kWeightBytes = V::kWeightBytes;
  static float finish(const float* saved) { return V::sum(V::restore(saved)); }

  // Adds columns [c0, c1) of the R x T products to acc: whole vectors, plus the zero-padded tail
  // when c1 == n. Every product goes through this, so an output's FMA chain (one accumulator of
  // kLanes lanes, columns in order, then V::sum) is the same whether the columns come in one
  // span or several: tiles, spans and matvec agree bit for bit. `stream`: one row (R = T = 1)
  // rows each read as part of a forward stream, which prefetch kStreamAhead bytes ahead of
  // themselves (T = 1).
  template <int R, int T>
  [[gnu::always_inline]] static inline void accumulate(int64_t c0, int64_t c1, int64_t n,
                                                       const uint8_t* const* w,
                                                       const float* const* xr, Vec (&acc)[R][T],
                                                       bool stream = false) {
    const int64_t whole = c1 < n ? c1 : n / kLanes * kLanes;
    int64_t i = c0;
    for (; i < whole; i += kLanes) {
      if constexpr (T == 1) {
        const int64_t at = i * kWeightBytes;
        if (stream && at % 64 == 0) {
          for (int r = 0; r < R; ++r) __builtin_prefetch(w[r] + at + kStreamAhead, 0, 3);
        }
        // One activation vector: convert each weight vector right where it is used, so the
        // accumulators of matvec stay in registers.
        const Vec xv = V::acts(xr[0], i);
        for (int r = 0; r < R; ++r) acc[r][0] = V::fma(V::weights(w[r], i), xv, acc[r][0]);
      } else {
        Vec wv[R];
        for (int r = 0; r < R; ++r) wv[r] = V::weights(w[r], i);
        for (int t = 0; t < T; ++t) {
          const Vec xv = V::acts(xr[t], i);
          for (int r = 0; r < R; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
        }
      }
    }
    if (c1 == n && i < n) {
      Vec wv[R];
      for (int r = 0; r < R; ++r) wv[r] = V::weights_tail(w[r], i, n - i);
      for (int t = 0; t < T; ++t) {
        const Vec xv = V::acts_tail(xr[t], i, n - i);
        for (int r = 0; r < R; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
      }
    }
  }

  // One token streams its rows from DRAM. Short rows (predictor fc2, whose rows are the
  // predictor's hidden width) put several rows in a page: the tile fetches the rows read after
  // them (`ahead`, from TileSet::gemv or gemv_streams). Longer rows of forward streams prefetch
  // kStreamAhead bytes ahead of where they read (tile_set.h). Scattered long rows (gathered, R
  // at a time) are left to the hardware prefetchers.
  static constexpr int64_t kMaxPrefetchRowBytes = 2048;

  template <int R, int T>
  static void tile(int64_t n, const uint8_t* const* w, const uint8_t* const* ahead,
                   const uint8_t* x, size_t ldx, float* y, size_t ldy) {
    Vec acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
    }
    const float* xr[T];
    for (int t = 0; t < T; ++t) xr[t] = reinterpret_cast<const float*>(x + t * ldx);
    bool stream = false;
    if constexpr (T == 1) {
      const int64_t bytes = n * kWeightBytes;
      if (bytes <= kMaxPrefetchRowBytes) {
        for (int r = 0; r < R; ++r) {
          for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(ahead[r] + o, 0, 3);
        }
      } else {
        stream = true;
        for (int r = 0; r < R; ++r) stream = stream && is_forward_stream(w[r], ahead[r], bytes);
      }
    }
    accumulate<R, T>(0, n, n, w, xr, acc, stream);
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) y[t * ldy + r] = V::sum(acc[r][t]);
    }
  }

  // tile() over columns [c0, c1) only, its R x T accumulators kept between spans in `saved`
  // (kLanes aligned floats each, row-major).
  template <int R, int T>
  static void span(int64_t c0, int64_t c1, int64_t n, const uint8_t* const* w, const uint8_t* x,
                   size_t ldx, float* saved) {
    Vec acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = V::restore(saved + kLanes * (r * T + t));
    }
    const float* xr[T];
    for (int t = 0; t < T; ++t) xr[t] = reinterpret_cast<const float*>(x + t * ldx);
    accumulate<R, T>(c0, c1, n, w, xr, acc);
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) V::save(saved + kLanes * (r * T + t), acc[r][t]);
    }
  }
};

// The streams of float_matvec at every vector width (WeightKernels::gemv_streams).
inline constexpr int kFloatStreams = 4;

// One token over float weights. Contiguous rows go as S forward streams (TileSet::gemv_streams):
// one row is one FMA chain, bound by the FMA's latency, and one stream at a time leaves DRAM's
// bandwidth unused, so S rows from S distant parts of the range go side by side. Gathered rows
// go R at a time (TileSet::gemv), R independent misses in flight.
template <typename Tiles, int R, int S>
void float_matvec(int64_t n, const RowList& rows, int64_t nr, const void* x, float* y) {
  if (rows.idx == nullptr) {
    TileSet<Tiles, S, 1>::gemv_streams(n, rows, nr, x, y);
  } else {
    TileSet<Tiles, R, 1>::gemv(n, rows, nr, x, y);
  }
}

}  // namespace hearth::cpu::tiles
