// The several-token axpy of float rows (F32, F16, BF16), written once for every vector width:
// y[t] += a[t, j] * W[idx[j]] for many tokens at once, as a small matrix product. The one-token
// row walk (avx2/axpy_avx2.cc) loads and stores every token's output once per pass of 4 rows,
// which for a dozen tokens moves more bytes than the weights; here the output goes a column block
// at a time (2 vectors), with the sums of up to T tokens held in registers over a block of rows,
// so each weight vector is converted once and meets every token in registers. Per output element
// the FMAs still run in ascending j, each V::fma(w, a, y) as the row walk computes it, and a zero
// coefficient adds an exact zero: a token's output is the same bits whichever tokens share the
// call (sparse_axpy_each relies on this).
//
// V supplies the vectors as for float_tiles.h (Vec, kLanes, splat, fma, weights, weights_tail,
// acts and acts_tail to read outputs, store, store_tail). Include after the ISA's intrinsics are
// enabled; instantiate only with a V private to one ISA namespace (see tile_set.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/cpu/kernels/generic/generic_kernels.h"

namespace hearth::cpu::tiles {

template <typename V, int T>
struct TokenAxpy {
  using Vec = typename V::Vec;
  static constexpr int kLanes = V::kLanes;
  // Rows per block: a block's row vectors are loaded once per block of T tokens.
  static constexpr int kRowBlock = 128;
  static constexpr int kFewTokenRows = 16;

  static void run(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                  const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const uint8_t* rows[kRowBlock];
    int64_t js[kRowBlock];
    for (int64_t j = 0; j < nr;) {
      int m = 0;
      for (; j < nr && m < kRowBlock; ++j) {
        if (!generic::axpy_row_active(a, lda, nt, j)) continue;
        rows[m] = wb + static_cast<size_t>(idx[j]) * ldw;
        js[m++] = j;
      }
      if (m == 0) continue;
      for (int64_t t0 = 0; t0 < nt; t0 += T) {
        const int tokens = static_cast<int>(nt - t0 < T ? nt - t0 : T);
        block(tokens, n, rows, js, m, a + t0 * lda, lda, y + t0 * ldy, ldy,
              std::make_integer_sequence<int, T>());
      }
    }
  }

  // y[t * ldy + c] = sum_j coef[j * ldc + t] * W[idx[j]][c] for t < nt, c < n, overwriting y:
  // every listed row, in ascending j, each term V::fma(w, a, y) from +0, so the bits of run()
  // into a zeroed y (a zero coefficient adds an exact zero). The coefficients come packed
  // token-fastest (no per-block gathering, no test for zero rows), and a block of rows meets
  // every token tile in turn: with n columns few enough, its weights stay in L1 across them.
  static void dense(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                    const float* coef, size_t ldc, int64_t nt, float* y, size_t ldy) {
    if (nr == 0) {
      for (int64_t t = 0; t < nt; ++t) {
        for (int64_t c = 0; c < n; ++c) y[t * ldy + c] = 0.0f;
      }
      return;
    }
    const auto* wb = static_cast<const uint8_t*>(w);
    // One tile of tokens has no rows to reuse across tiles: short blocks then, whose rows are
    // read as a few streams side by side rather than a cache line of each of 128 rows at a time.
    const int64_t block = nt <= T ? kFewTokenRows : kRowBlock;
    const uint8_t* rows[kRowBlock];
    for (int64_t j0 = 0; j0 < nr; j0 += block) {
      const int m = static_cast<int>(nr - j0 < block ? nr - j0 : block);
      for (int r = 0; r < m; ++r) rows[r] = wb + static_cast<size_t>(idx[j0 + r]) * ldw;
      for (int64_t t0 = 0; t0 < nt; t0 += T) {
        const int tokens = static_cast<int>(nt - t0 < T ? nt - t0 : T);
        const float* const cf = coef + j0 * ldc + t0;
        if (j0 == 0) {
          dense_block<true>(tokens, n, rows, m, cf, ldc, y + t0 * ldy, ldy,
                            std::make_integer_sequence<int, T>());
        } else {
          dense_block<false>(tokens, n, rows, m, cf, ldc, y + t0 * ldy, ldy,
                             std::make_integer_sequence<int, T>());
        }
      }
    }
  }

 private:
  // The columns [c, c + kLanes Vs) of U tokens over m rows, row r's coefficients at
  // coef[r * ldc, + U); with Tail, one vector of the last `tail` < kLanes columns. The sums start
  // from y, or from +0 with FromZero.
  template <int U, int Vs, bool Tail = false, bool FromZero = false>
  static void columns(const uint8_t* const* rows, int m, const float* coef, size_t ldc, int64_t c,
                      float* y, size_t ldy, int64_t tail = kLanes) {
    static_assert(!Tail || Vs == 1);
    Vec acc[U][Vs];
    for (int t = 0; t < U; ++t) {
      for (int v = 0; v < Vs; ++v) {
        const float* const yv = y + t * ldy;
        if constexpr (FromZero) {
          acc[t][v] = V::splat(0.0f);
        } else {
          acc[t][v] = Tail ? V::acts_tail(yv, c, tail) : V::acts(yv, c + kLanes * v);
        }
      }
    }
    for (int r = 0; r < m; ++r) {
      Vec wv[Vs];
      for (int v = 0; v < Vs; ++v) {
        wv[v] = Tail ? V::weights_tail(rows[r], c, tail) : V::weights(rows[r], c + kLanes * v);
      }
      for (int t = 0; t < U; ++t) {
        const Vec b = V::splat(coef[r * ldc + t]);
        for (int v = 0; v < Vs; ++v) acc[t][v] = V::fma(wv[v], b, acc[t][v]);
      }
    }
    for (int t = 0; t < U; ++t) {
      for (int v = 0; v < Vs; ++v) {
        float* const yv = y + t * ldy + c + kLanes * v;
        if constexpr (Tail) {
          V::store_tail(yv, acc[t][v], tail);
        } else {
          V::store(yv, acc[t][v]);
        }
      }
    }
  }

  // U tokens (coefficients at a + t * lda, outputs at y + t * ldy) over m rows.
  template <int U>
  static void rows_of(int64_t n, const uint8_t* const* rows, const int64_t* js, int m,
                      const float* a, size_t lda, float* y, size_t ldy) {
    alignas(64) float coef[kRowBlock][T];
    for (int r = 0; r < m; ++r) {
      for (int t = 0; t < U; ++t) coef[r][t] = a[t * lda + js[r]];
    }
    all_columns<U, false>(n, rows, m, &coef[0][0], T, y, ldy);
  }

  // U tokens over m rows, every column: blocks of 2 vectors, then one, then the tail. The sums
  // start from y, or from +0 with FromZero.
  template <int U, bool FromZero>
  static void all_columns(int64_t n, const uint8_t* const* rows, int m, const float* coef,
                          size_t ldc, float* y, size_t ldy) {
    int64_t c = 0;
    for (; c + 2 * kLanes <= n; c += 2 * kLanes) {
      columns<U, 2, false, FromZero>(rows, m, coef, ldc, c, y, ldy);
    }
    if (c + kLanes <= n) {
      columns<U, 1, false, FromZero>(rows, m, coef, ldc, c, y, ldy);
      c += kLanes;
    }
    if (c < n) columns<U, 1, true, FromZero>(rows, m, coef, ldc, c, y, ldy, n - c);
  }
  // all_columns<tokens, FromZero>, for tokens in 1..T (dense()).
  template <bool FromZero, int... Us>
  static void dense_block(int tokens, int64_t n, const uint8_t* const* rows, int m,
                          const float* coef, size_t ldc, float* y, size_t ldy,
                          std::integer_sequence<int, Us...>) {
    ((tokens == Us + 1 ? all_columns<Us + 1, FromZero>(n, rows, m, coef, ldc, y, ldy) : void()),
     ...);
  }

  // rows_of<tokens>, for tokens in 1..T.
  template <int... Us>
  static void block(int tokens, int64_t n, const uint8_t* const* rows, const int64_t* js, int m,
                    const float* a, size_t lda, float* y, size_t ldy,
                    std::integer_sequence<int, Us...>) {
    ((tokens == Us + 1 ? rows_of<Us + 1>(n, rows, js, m, a, lda, y, ldy) : void()), ...);
  }
};

}  // namespace hearth::cpu::tiles
