// The tile cover for a few tokens (batched decode): like TileSet, but the columns go in spans.
// ISA-neutral like tile_set.h (see there why it avoids standard algorithms over floats).
//
// TileSet runs each R x T tile over whole rows, so with 8 tokens a weight tile is read once per
// token tile and the activation rows (32 KB per 4 tokens of 2048 floats, 90 KB at 5632) pass
// through L1 between the two reads. Here a span of R weight rows meets every token tile while it
// is still in L1, each tile's accumulators kept in memory from span to span, so the weights
// leave memory once for all token tiles. The span length matters little while a span and its
// activations stay in L1 (figures in docs/benchmarks.md).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "backend/cpu/kernels/tile_set.h"

namespace hearth::cpu::tiles {

// A multiple of every ISA's vector width, so a span boundary never moves a column to another
// accumulator lane.
inline constexpr int64_t kSpanCols = 256;

// K::span<R, T>(c0, c1, n, w, x, ldx, saved) adds columns [c0, c1) of an R x T tile to its R * T
// saved accumulators (K::kLanes floats each, row-major), taking the zero-padded tail when
// c1 == n; K::finish(saved accumulator) is the output; K::kWeightBytes is the bytes of one
// weight column. For at most kMaxTokens tokens.
//
// While a block of rows computes, the next block's rows are prefetched a span at a time: a row
// is often one 4 KiB page (2048 F16 columns) and the hardware prefetchers stop at page
// boundaries, so without it every new row starts with a wait for DRAM that the FMAs of the
// previous rows do not hide. Figures in docs/benchmarks.md.
template <typename K, int R, int T>
class SpanTileSet {
 public:
  static constexpr int64_t kMaxTokens = 16;

  static void gemm(int64_t n, const RowList& rows, int64_t nr, const void* x, size_t ldx,
                   int64_t nt, float* y, size_t ldy) {
    constexpr int64_t kMaxTiles = (kMaxTokens + T - 1) / T;
    constexpr int kAccFloats = R * T * K::kLanes;
    alignas(64) float acc[kMaxTiles][kAccFloats];
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t tiles = (nt + T - 1) / T;
    for (int64_t r0 = 0; r0 < nr; r0 += R) {
      const int64_t rr = nr - r0 < R ? nr - r0 : R;
      const uint8_t* w[R];
      for (int64_t r = 0; r < rr; ++r) w[r] = rows.row(r0 + r);
      const uint8_t* next[R];
      const int64_t rn = nr - r0 - rr < R ? nr - r0 - rr : R;
      for (int64_t r = 0; r < rn; ++r) next[r] = rows.row(r0 + rr + r);
      for (int64_t k = 0; k < tiles; ++k) {
        for (int i = 0; i < kAccFloats; ++i) acc[k][i] = 0.0f;
      }
      for (int64_t c0 = 0; c0 < n; c0 += kSpanCols) {
        const int64_t c1 = n - c0 < kSpanCols ? n : c0 + kSpanCols;
        for (int64_t r = 0; r < rn; ++r) {
          for (int64_t b = c0 * K::kWeightBytes; b < c1 * K::kWeightBytes; b += 64) {
            __builtin_prefetch(next[r] + b, 0, 3);
          }
        }
        for (int64_t k = 0; k < tiles; ++k) {
          const int64_t tt = nt - k * T < T ? nt - k * T : T;
          kSpans[(rr - 1) * T + (tt - 1)](c0, c1, n, w, xb + k * T * ldx, ldx, acc[k]);
        }
      }
      for (int64_t k = 0; k < tiles; ++k) {
        const int64_t tt = nt - k * T < T ? nt - k * T : T;
        for (int64_t t = 0; t < tt; ++t) {
          for (int64_t r = 0; r < rr; ++r)
            y[(k * T + t) * ldy + r0 + r] = K::finish(&acc[k][K::kLanes * (r * tt + t)]);
        }
      }
    }
  }

 private:
  using SpanFn = void (*)(int64_t c0, int64_t c1, int64_t n, const uint8_t* const* w,
                          const uint8_t* x, size_t ldx, float* saved);
  template <size_t... I>
  static constexpr std::array<SpanFn, R * T> make(std::index_sequence<I...>) {
    return {&K::template span<static_cast<int>(I) / T + 1, static_cast<int>(I) % T + 1>...};
  }
  static constexpr std::array<SpanFn, R* T> kSpans = make(std::make_index_sequence<R * T>{});
};

}  // namespace hearth::cpu::tiles
