// The one-token axpy of float rows (F32, F16, BF16), written once for every vector width:
// y += a[j] * W[idx[j]] over the rows whose coefficient is not zero, in ascending j, or the same
// over consecutive parts of the list, each into its own y (axpy_parts). The rows go R at a time:
// each pass loads y once per column block, adds its R rows with one FMA each, and stores it,
// while it prefetches the same columns of the next pass's rows (scattered rows are too short for
// the hardware prefetchers to ramp up on). A pass never spans two parts, but the next pass's rows
// may lie in the next part, so a walk over many short parts (lane_matvec's lanes, sparse_axpy's
// chunks) never restarts cold. Per output element the FMAs run in ascending
// j, each fma(a_j, w, y) with one rounding, so the result is the same bits whatever R and the
// vector width: the AVX2 and AVX-512 tables agree, and lane_matvec can rebuild a dense dot
// product's lanes from it.
//
// V supplies the vectors as for float_tiles.h (Vec, kLanes, kWeightBytes, splat, fma, weights,
// weights_tail, acts, acts_tail, store, store_tail). Include after the ISA's intrinsics are
// enabled; instantiate only with a V private to one ISA namespace (see tile_set.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace hearth::cpu::tiles {

template <typename V, int R>
struct RowWalk {
  using Vec = typename V::Vec;
  // Active rows gathered ahead of the walk, so each pass knows the next one's rows.
  static constexpr int kWindow = 64;

  static void run(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                  const float* a, float* y) {
    const int64_t ends[1] = {nr};
    run_parts(n, w, ldw, idx, a, ends, 1, y, 0);
  }

  // Positions [ends[q - 1], ends[q]) of idx and a (ends[-1] = 0) into y + q * ldy.
  static void run_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                        const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
    const auto* wb = static_cast<const uint8_t*>(w);
    // Active rows [p, m) of the window, with their outputs; R spare entries repeat the last row,
    // so every pass has R valid rows to prefetch.
    const uint8_t* rows[kWindow + R];
    float coef[kWindow];
    float* out[kWindow];
    int p = 0, m = 0;
    int64_t j = 0, part = 0;
    while (true) {
      if (m - p < 2 * R && part < n_parts) {
        std::copy(rows + p, rows + m, rows);
        std::copy(coef + p, coef + m, coef);
        std::copy(out + p, out + m, out);
        m -= p;
        p = 0;
        while (part < n_parts && m < kWindow) {
          if (j == ends[part]) {
            ++part;
            continue;
          }
          if (a[j] != 0.0f) {
            rows[m] = wb + static_cast<size_t>(idx[j]) * ldw;
            coef[m] = a[j];
            out[m++] = y + static_cast<size_t>(part) * ldy;
          }
          ++j;
        }
        for (int r = m; r < m + R && m > 0; ++r) rows[r] = rows[m - 1];
      }
      if (p == m) return;
      int count = 1;
      while (count < R && p + count < m && out[p + count] == out[p]) ++count;
      const uint8_t* const* next = p + count < m ? rows + p + count : rows + p;
      dispatch<R>(count, n, rows + p, next, coef + p, out[p]);
      p += count;
    }
  }

 private:
  template <int K>
  static void dispatch(int count, int64_t n, const uint8_t* const* w, const uint8_t* const* next,
                       const float* coef, float* y) {
    if constexpr (K > 1) {
      if (count < K) return dispatch<K - 1>(count, n, w, next, coef, y);
    }
    pass<K>(n, w, next, coef, y);
  }

  // K rows over n columns, two vectors at a time, then one, then the tail.
  template <int K>
  static void pass(int64_t n, const uint8_t* const* w, const uint8_t* const* next,
                   const float* coef, float* y) {
    constexpr int64_t kCols = 2 * V::kLanes;
    Vec c[K];
    for (int r = 0; r < K; ++r) c[r] = V::splat(coef[r]);
    int64_t i = 0;
    for (; i + kCols <= n; i += kCols) {
      // Each cache line of the next rows once, from the block holding its first byte.
      const int64_t b1 = (i + kCols) * V::kWeightBytes;
      for (int64_t b = (i * V::kWeightBytes + 63) / 64 * 64; b < b1; b += 64) {
        for (int r = 0; r < K; ++r) __builtin_prefetch(next[r] + b, 0, 3);
      }
      Vec acc0 = V::acts(y, i), acc1 = V::acts(y, i + V::kLanes);
      for (int r = 0; r < K; ++r) {
        acc0 = V::fma(c[r], V::weights(w[r], i), acc0);
        acc1 = V::fma(c[r], V::weights(w[r], i + V::kLanes), acc1);
      }
      V::store(y + i, acc0);
      V::store(y + i + V::kLanes, acc1);
    }
    for (; i < n; i += V::kLanes) {
      const int64_t count = std::min<int64_t>(n - i, V::kLanes);
      Vec acc = count == V::kLanes ? V::acts(y, i) : V::acts_tail(y, i, count);
      for (int r = 0; r < K; ++r) {
        acc = V::fma(
            c[r], count == V::kLanes ? V::weights(w[r], i) : V::weights_tail(w[r], i, count), acc);
      }
      if (count == V::kLanes) {
        V::store(y + i, acc);
      } else {
        V::store_tail(y + i, acc, count);
      }
    }
  }
};

}  // namespace hearth::cpu::tiles
