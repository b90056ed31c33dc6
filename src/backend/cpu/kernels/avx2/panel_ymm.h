// The 256-bit widths of the row-panel engine (panel_engine.h): 8 rows a vector, so a panel of 16
// rows is two vectors ("units"), and one pass holds one panel against kTokens tokens in the 16
// registers. Two products:
//   YmmMaddubs (AVX2): maddubs multiplies each row's 4 unsigned codes by the 4 broadcast quants
//     into two int16 pair sums, which add up in int16 for kWindow runs before madd widens them
//     to the row's int32 lane. That is exact while 2 * 128 * kMaxCode * kWindow < 2^15; formats
//     whose codes reach 255 (offset binary) would saturate and keep the tile engines.
//   YmmDp<Dp> (AVX-VNNI, or AVX512-VNNI's EVEX form): Dp::dot, vpdpbusd straight into int32.
// Both reach the exact integer sums of the 512-bit panels, so the outputs are the same bits.
// Include only from files compiled with the avx2/ flags or more.
#pragma once

#include <cstdint>

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/panel_engine.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// The vector operations the formats' finish and the engine use, on 8 rows.
struct YmmOps {
  using F = __m256;
  using I = __m256i;
  static constexpr int kLanes = 8;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_load_ps(p); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F to_float(I v) { return _mm256_cvtepi32_ps(v); }
  static I zeroi() { return _mm256_setzero_si256(); }
  static I set1i(int32_t v) { return _mm256_set1_epi32(v); }
  // int32 values stored in a float array (the side data's integer scales).
  static I loadi(const float* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static I addi(I a, I b) { return _mm256_add_epi32(a, b); }
  static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I codes(const uint8_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }

  // Lanes [0, count) of v to p.
  static void store_first(float* p, F v, int count) {
    if (count == kLanes) {
      _mm256_storeu_ps(p, v);
      return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane), v);
  }

  // One block of 16 rows into a panel: c[r] holds row r's 32 unsigned codes in weight order;
  // `out` receives 8 runs of 64 bytes, run k (codes 4k..4k+3) of every row. Two 8 x 8
  // transposes of 32-bit elements, rows 0-7 into the first 32 bytes of each run, 8-15 after.
  static void store_runs(const __m256i (&c)[kPanelRows], uint8_t* out) {
    for (int half = 0; half < 2; ++half) {
      const __m256i* r = c + 8 * half;
      __m256i a[8], b[8];
      for (int i = 0; i < 4; ++i) {
        a[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);      // runs 0, 1 | 4, 5
        a[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);  // runs 2, 3 | 6, 7
      }
      for (int j = 0; j < 2; ++j) {
        // Rows 4j..4j+3: runs 0 | 4, 1 | 5, 2 | 6, 3 | 7.
        b[4 * j] = _mm256_unpacklo_epi64(a[4 * j], a[4 * j + 2]);
        b[4 * j + 1] = _mm256_unpackhi_epi64(a[4 * j], a[4 * j + 2]);
        b[4 * j + 2] = _mm256_unpacklo_epi64(a[4 * j + 1], a[4 * j + 3]);
        b[4 * j + 3] = _mm256_unpackhi_epi64(a[4 * j + 1], a[4 * j + 3]);
      }
      for (int k = 0; k < 4; ++k) {
        auto* lo = reinterpret_cast<__m256i*>(out + k * 64 + 32 * half);
        auto* hi = reinterpret_cast<__m256i*>(out + (k + 4) * 64 + 32 * half);
        _mm256_store_si256(lo, _mm256_permute2x128_si256(b[k], b[k + 4], 0x20));
        _mm256_store_si256(hi, _mm256_permute2x128_si256(b[k], b[k + 4], 0x31));
      }
    }
  }
};

// AVX2's product: int16 pair sums by maddubs, widened by madd every kWindow<F> runs.
struct YmmMaddubs : YmmOps {
  static constexpr int kPanels = 1;
  // The most runs whose int16 sums cannot saturate (|quant| <= 128, two products a lane), within
  // one of the block's sums.
  template <typename F>
  static constexpr int window() {
    int w = 1;
    while (w < 8 / F::kSums && 2 * 128 * F::kMaxCode * (2 * w) < 32768) w *= 2;
    return w;
  }
  template <typename F>
  static constexpr int kWindow = window<F>();
  // Every window has its int16 sums live beside the int32 ones: fewer tokens for short windows.
  template <typename F>
  static constexpr int kTokens = kWindow<F> == 8 ? 4 : 2;
  // Whether F's codes fit maddubs at all.
  template <typename F>
  static constexpr bool fits() {
    return 2 * 128 * F::kMaxCode < 32768;
  }

  static I pairs(I w, I q) { return _mm256_maddubs_epi16(w, q); }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I widen(I v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }
};

// VNNI's product: Dp::dot(acc, u, s), vpdpbusd into the int32 lanes.
template <typename Dp>
struct YmmDp : YmmOps {
  static constexpr int kPanels = 1;
  template <typename F>
  static constexpr int kWindow = 0;
  template <typename F>
  static constexpr int kTokens = F::kSums == 1 ? 6 : 3;

  static I dp(I acc, I w, I q) { return Dp::dot(acc, w, q); }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
