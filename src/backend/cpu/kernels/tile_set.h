// The register-tile engine shared by the vector kernel folders (avx2/, avxvnni/, avx512/): which
// weight rows a gemm reads, how an nr x nt output is covered by R x T tiles, and the kernel-table
// entries built from a tile kernel. It holds no intrinsics; each ISA's tiles are a class K with
// `template <int R, int T> static void tile(...)`.
//
// Every template here is instantiated with a K that lives in an anonymous namespace of one
// translation unit, so each instantiation is private to the ISA it was compiled for: an AVX-512
// copy can never stand in for an AVX2 one at link time. For the same reason the code avoids
// standard algorithms over floats (their instantiations are shared between translation units).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::tiles {

// The weight rows of a gemm: row r at base + r * ldw, or, for a gather, at base + idx[r] * ldw.
struct RowList {
  const uint8_t* base;
  size_t ldw;
  const int32_t* idx;  // null: contiguous rows

  const uint8_t* row(int64_t r) const {
    return base + (idx ? static_cast<size_t>(idx[r]) : static_cast<size_t>(r)) * ldw;
  }
};

// A tile kernel computes y[t * ldy + r] for an R x T block of (weight row w[r], activation row
// x + t * ldx). ahead[r] is where the tile may prefetch while it reads row r: the row a later
// tile reads (one-token tiles, which stream from DRAM, use it; the others ignore it). ahead = w
// fetches nothing new.
using TileFn = void (*)(int64_t n, const uint8_t* const* w, const uint8_t* const* ahead,
                        const uint8_t* x, size_t ldx, float* y, size_t ldy);

// A one-token tile row that is followed in memory by the next row it is given as `ahead`
// (TileSet::gemv's runs of consecutive rows, gemv_streams' parts) reads a forward stream. Such a
// row prefetches kStreamAhead bytes ahead of where it reads: far enough to cover DRAM's latency
// at one core's share of the bandwidth, which the hardware prefetchers alone do not reach once
// the products are quick. Both tile engines (float_tiles.h, avx2/group_tiles.h) follow this.
inline constexpr int64_t kStreamAhead = 8192;
// (static: each ISA's translation unit keeps its own copy, as with the templates here.)
static inline bool is_forward_stream(const uint8_t* w, const uint8_t* ahead, int64_t row_bytes) {
  return ahead == w + row_bytes;
}
// Prefetches the Bytes bytes from p into L1, a line an iteration. Kept a loop: unrolled, the
// prefetches go out in one burst and the step's own loads wait behind them (docs/benchmarks.md).
// And kept at all: GCC deletes a loop that does nothing but prefetch once it is inlined into some
// callers, which the empty asm, an input it must compute, prevents.
template <size_t Bytes>
[[gnu::always_inline]] static inline void prefetch_lines(const void* p) {
  const char* at = static_cast<const char*>(p);
#pragma GCC unroll 1
  for (size_t line = 0; line < Bytes; line += 64) {
    __builtin_prefetch(at + line, 0, 3);
    asm volatile("" : : "r"(at + line));
  }
}

// Covers an nr x nt output with K's register-blocked tiles of at most R x T, using smaller
// instantiations at the edges. Rows are the outer loop so a weight tile stays in L1 while it
// meets every activation row. Tiles see only row pointers, so gathered rows take the same
// tiles (and give the same bits) as contiguous ones. gemm and gemv are inlined into the
// kernel-table entries, so that contiguous rows (no index list) compile as such.
template <typename K, int R, int T>
class TileSet {
 public:
  // Many tokens, or one token over rows the hardware prefetchers follow alone (float rows of a
  // page or more): nothing is prefetched, since streaming one token's rows is gemv's part.
  [[gnu::always_inline]] static void gemm(int64_t n, const RowList& rows, int64_t nr, const void* x,
                                          size_t ldx, int64_t nt, float* y, size_t ldy) {
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int64_t r0 = 0; r0 < nr; r0 += R) {
      const int64_t rr = nr - r0 < R ? nr - r0 : R;
      const uint8_t* w[R];
      for (int64_t r = 0; r < rr; ++r) w[r] = rows.row(r0 + r);
      for (int64_t t0 = 0; t0 < nt; t0 += T) {
        const int64_t tt = nt - t0 < T ? nt - t0 : T;
        kTiles[(rr - 1) * T + (tt - 1)](n, w, w, xb + t0 * ldx, ldx, y + t0 * ldy + r0, ldy);
      }
    }
  }

  // One token (T = 1) over rows that stream from DRAM, for tiles whose shape changes no bits.
  // Every weight is read once, so what counts is the order of the reads: a run of consecutive
  // rows goes one row at a time, a single forward stream that the hardware prefetchers follow
  // (R rows side by side are R interleaved streams within the same pages, which they do not);
  // scattered gathered rows go R at a time, R independent misses in flight, each tile
  // prefetching the next one's rows (the last tile has none and refetches its own lines).
  [[gnu::always_inline]] static void gemv(int64_t n, const RowList& rows, int64_t nr, const void* x,
                                          float* y) {
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int64_t r0 = 0; r0 < nr; r0 += R) {
      const int64_t rr = nr - r0 < R ? nr - r0 : R;
      if (consecutive(rows, r0, rr)) {
        for (int64_t r = r0; r < r0 + rr; ++r) {
          const uint8_t* w = rows.row(r);
          const uint8_t* ahead = w + rows.ldw;
          kTiles[0](n, &w, &ahead, xb, 0, y + r, 0);
        }
        continue;
      }
      const uint8_t* w[R];
      const uint8_t* ahead[R];
      for (int64_t r = 0; r < rr; ++r) {
        w[r] = rows.row(r0 + r);
        ahead[r] = r0 + R + r < nr ? rows.row(r0 + R + r) : w[r];
      }
      kTiles[(rr - 1) * T](n, w, ahead, xb, 0, y + r0, 0);
    }
  }

  // One token over contiguous rows (rows.idx null) read as R forward streams: [0, nr) is cut
  // into R parts of consecutive rows and each tile takes the next row of every part. A row is
  // still one FMA chain of its own (the bits of gemv), but a core keeps R chains and R streams
  // in flight, each in pages of its own, where gemv's single stream waits on one chain's
  // latency and R adjacent rows side by side read the same pages at once, which the hardware
  // prefetchers serve worse (docs/benchmarks.md, "Float decode as four streams").
  [[gnu::always_inline]] static void gemv_streams(int64_t n, const RowList& rows, int64_t nr,
                                                  const void* x, float* y) {
    static_assert(T == 1, "gemv_streams takes one token");
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t part = (nr + R - 1) / R;  // rows per stream; the last parts may be shorter
    for (int64_t k = 0; k < part; ++k) {
      const uint8_t* w[R];
      const uint8_t* ahead[R];
      int64_t at[R];
      int rr = 0;
      // Parts are in row order, so once one has no row k the later ones have none either.
      for (int s = 0; s < R && s * part + k < nr; ++s, ++rr) {
        at[rr] = s * part + k;
        w[rr] = rows.row(at[rr]);
        ahead[rr] = w[rr] + rows.ldw;
      }
      float out[R];
      kTiles[(rr - 1) * T](n, w, ahead, xb, 0, out, 0);
      for (int s = 0; s < rr; ++s) y[at[s]] = out[s];
    }
  }

 private:
  // Whether rows [r0, r0 + count) lie one after another in memory. Gathered index lists are
  // ascending and distinct, so their span tells; were one not, only the speed would change.
  static bool consecutive(const RowList& rows, int64_t r0, int64_t count) {
    return rows.idx == nullptr || rows.idx[r0 + count - 1] - rows.idx[r0] == count - 1;
  }

  template <size_t... I>
  static constexpr std::array<TileFn, R * T> make(std::index_sequence<I...>) {
    return {&K::template tile<static_cast<int>(I) / T + 1, static_cast<int>(I) % T + 1>...};
  }
  static constexpr std::array<TileFn, R* T> kTiles = make(std::make_index_sequence<R * T>{});
};

// One weight row against one activation row through K's 1 x 1 tile: the dot kernel.
template <typename K>
float tile_dot(int64_t n, const void* w, const void* x) {
  const auto* row = static_cast<const uint8_t*>(w);
  float y;
  K::template tile<1, 1>(n, &row, &row, static_cast<const uint8_t*>(x), 0, &y, 0);
  return y;
}

// A tile engine's gemm over a RowList (it picks the tile shapes).
using RowsGemmFn = void (*)(int64_t n, const RowList& rows, int64_t nr, const void* x, size_t ldx,
                            int64_t nt, float* y, size_t ldy);

// The kernel-table entries of a tile engine: contiguous and gathered rows through the same
// tiles, and the 1 x 1 tile as the dot product.
template <RowsGemmFn Gemm>
void gemm_contiguous(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
                     int64_t nt, float* y, size_t ldy) {
  Gemm(n, {static_cast<const uint8_t*>(w), ldw, nullptr}, nr, x, ldx, nt, y, ldy);
}
template <RowsGemmFn Gemm>
void gemm_gather(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                 const void* x, size_t ldx, int64_t nt, float* y, size_t ldy) {
  Gemm(n, {static_cast<const uint8_t*>(w), ldw, idx}, nr, x, ldx, nt, y, ldy);
}
// A gemm that streams one token's rows through TileSet::gemv (R1-row tiles where rows are
// scattered) and covers more tokens with R2 x T2 tiles. Always inlined into the kernel-table
// entries, so that contiguous rows compile as such.
template <typename K, int R1, int R2, int T2>
[[gnu::always_inline]] inline void gemm_by_tokens(int64_t n, const RowList& rows, int64_t nr,
                                                  const void* x, size_t ldx, int64_t nt, float* y,
                                                  size_t ldy) {
  if (nt == 1) {
    TileSet<K, R1, 1>::gemv(n, rows, nr, x, y);
  } else {
    TileSet<K, R2, T2>::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  }
}

template <typename K, RowsGemmFn Gemm>
void set_tile_kernels(WeightKernels& k) {
  k.dot = tile_dot<K>;
  k.gemm = gemm_contiguous<Gemm>;
  k.gemm_gather = gemm_gather<Gemm>;
}

}  // namespace hearth::cpu::tiles
