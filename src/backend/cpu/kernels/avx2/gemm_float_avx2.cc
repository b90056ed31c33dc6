// F32 activations against F32, F16 and BF16 weight rows: register-blocked FMA tiles. Each weight
// vector is converted once per tile and meets T activation rows; each activation vector meets R
// weight rows.
#include <cstring>

#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/float_loads.h"
#include "backend/cpu/kernels/avx2/span_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

inline __m256 load_tail_f32(const float* x, int64_t i, int64_t count) {
  alignas(32) float buf[8] = {};
  std::memcpy(buf, x + i, static_cast<size_t>(count) * sizeof(float));
  return _mm256_load_ps(buf);
}

template <typename L>
struct FloatTiles {
  // Adds columns [c0, c1) of the R x T products to acc: whole vectors, plus the zero-padded tail
  // when c1 == n. Every product goes through this, so an output's FMA chain (one 8-lane
  // accumulator, columns in order, then hsum) is the same whether the columns come in one span
  // or several: tiles, spans and matvec agree bit for bit.
  template <int R, int T>
  [[gnu::always_inline]] static inline void accumulate(int64_t c0, int64_t c1, int64_t n,
                                                       const uint8_t* const* w,
                                                       const float* const* xr,
                                                       __m256 (&acc)[R][T]) {
    const int64_t whole = c1 < n ? c1 : n & ~int64_t{7};
    int64_t i = c0;
    for (; i < whole; i += 8) {
      if constexpr (T == 1) {
        // One activation vector: convert each weight vector right where it is used, so the 8
        // accumulators of matvec stay in registers.
        const __m256 xv = _mm256_loadu_ps(xr[0] + i);
        for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(L::load8(w[r], i), xv, acc[r][0]);
      } else {
        __m256 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = L::load8(w[r], i);
        for (int t = 0; t < T; ++t) {
          const __m256 xv = _mm256_loadu_ps(xr[t] + i);
          for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
        }
      }
    }
    if (c1 == n && i < n) {
      __m256 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = load_tail<L>(w[r], i, n - i);
      for (int t = 0; t < T; ++t) {
        const __m256 xv = load_tail_f32(xr[t], i, n - i);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
  }

  template <int R, int T>
  // `ahead` goes unused: software prefetch measured no gain here, for gathered rows too (the
  // rows are long enough for the hardware prefetchers).
  static void tile(int64_t n, const uint8_t* const* w, const uint8_t* const* /*ahead*/,
                   const uint8_t* x, size_t ldx, float* y, size_t ldy) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const float* xr[T];
    for (int t = 0; t < T; ++t) xr[t] = reinterpret_cast<const float*>(x + t * ldx);
    accumulate<R, T>(0, n, n, w, xr, acc);
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) y[t * ldy + r] = hsum(acc[r][t]);
    }
  }

  // tile() over columns [c0, c1) only, its R x T accumulators kept between spans in `saved`
  // (32-byte aligned, 8 floats each, row-major).
  template <int R, int T>
  static void span(int64_t c0, int64_t c1, int64_t n, const uint8_t* const* w, const uint8_t* x,
                   size_t ldx, float* saved) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_load_ps(saved + 8 * (r * T + t));
    }
    const float* xr[T];
    for (int t = 0; t < T; ++t) xr[t] = reinterpret_cast<const float*>(x + t * ldx);
    accumulate<R, T>(c0, c1, n, w, xr, acc);
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) _mm256_store_ps(saved + 8 * (r * T + t), acc[r][t]);
    }
  }
};

// 3 x 4 keeps 12 accumulators, 3 weight vectors and 1 activation vector in the 16 registers.
// matvec streams weights from DRAM: 8 rows at a time give 8 independent FMA chains and 8 memory
// streams in flight, which measured 54 GB/s for F16 on 2 Zen 5 cores against 42 GB/s with 4.
// A few tokens (batched decode) take the same tiles in column spans (span_tiles.h).
template <typename L>
void gemm_float(int64_t n, const RowList& rows, int64_t nr, const void* x, size_t ldx, int64_t nt,
                float* y, size_t ldy) {
  using Spans = SpanTileSet<FloatTiles<L>, 3, 4>;
  if (nt == 1) {
    TileSet<FloatTiles<L>, 8, 1>::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  } else if (nt <= Spans::kMaxTokens) {
    Spans::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  } else {
    TileSet<FloatTiles<L>, 3, 4>::gemm(n, rows, nr, x, ldx, nt, y, ldy);
  }
}

}  // namespace

void set_float_kernels(Kernels& k) {
  set_tile_kernels<FloatTiles<LoadF32>, gemm_float<LoadF32>>(k.f32);
  set_tile_kernels<FloatTiles<LoadF16>, gemm_float<LoadF16>>(k.f16);
  set_tile_kernels<FloatTiles<LoadBf16>, gemm_float<LoadBf16>>(k.bf16);
}

}  // namespace hearth::cpu::avx2
