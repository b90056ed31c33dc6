// The 512-bit width of the row-panel engine (avx2/panel_engine.h): 16 rows a vector, one panel
// per vector, with the 512-bit vpdpbusd, which runs at twice the 256-bit one's rate on Zen 5.
// Two panels share each pass, against 6 tokens. Include only from files compiled with the
// avx512/ flags.
#pragma once

#include <cstdint>

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/panel_engine.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {

using avx2::kPanelRows;

// permutex2var indices of store_runs' 16 x 8 transpose of 32-bit runs: index i < 16 picks
// element i of the first operand, i + 16 element i of the second.
struct TransposeIndex {
  int32_t v[16];
};
// Stage 1: rows 4i..4i+3 (two per input), half h of the runs; element k * 4 + r.
constexpr TransposeIndex stage1_index(int h) {
  TransposeIndex t{};
  for (int k = 0; k < 4; ++k) {
    for (int r = 0; r < 4; ++r) t.v[k * 4 + r] = (r / 2) * 16 + (r % 2) * 8 + h * 4 + k;
  }
  return t;
}
// Stage 2: rows 8j..8j+7 (four per input), runs 2m and 2m + 1 of a half; element k * 8 + r.
constexpr TransposeIndex stage2_index(int m) {
  TransposeIndex t{};
  for (int k = 0; k < 2; ++k) {
    for (int r = 0; r < 8; ++r) t.v[k * 8 + r] = (r / 4) * 16 + (2 * m + k) * 4 + r % 4;
  }
  return t;
}
// Stage 3: all 16 rows (eight per input) of run k of the pair; element r.
constexpr TransposeIndex stage3_index(int k) {
  TransposeIndex t{};
  for (int r = 0; r < 16; ++r) t.v[r] = (r / 8) * 16 + k * 8 + r % 8;
  return t;
}
inline __m512i index_vector(const TransposeIndex& t) {
  return _mm512_loadu_si512(static_cast<const void*>(t.v));
}

// [a | b]. (The masked forms here: GCC 12's unmasked ones trip -Wuninitialized.)
inline __m512i join(__m256i a, __m256i b) {
  return _mm512_mask_broadcast_i64x4(_mm512_maskz_broadcast_i64x4(0x0f, a), 0xf0, b);
}

struct ZmmPanels {
  using F = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16;
  static constexpr int kPanels = 2;
  template <typename Fmt>
  static constexpr int kWindow = 0;
  template <typename Fmt>
  static constexpr int kTokens = 6;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_load_ps(p); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F to_float(I v) { return _mm512_cvtepi32_ps(v); }
  static I zeroi() { return _mm512_setzero_si512(); }
  // (For the activation quants: a separate vpbroadcastd keeps vpdpbusd at its full rate, where a
  // broadcast folded into its memory operand halves it, on Zen 5.)
  static I set1i(int32_t v) { return _mm512_set1_epi32(v); }
  static I loadi(const float* p) { return _mm512_load_si512(p); }
  static I addi(I a, I b) { return _mm512_add_epi32(a, b); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I codes(const uint8_t* p) { return _mm512_load_si512(p); }
  static I dp(I acc, I w, I q) { return _mm512_dpbusd_epi32(acc, w, q); }

  static void store_first(float* p, F v, int count) {
    _mm512_mask_storeu_ps(p, first_lanes(count), v);
  }

  // One block of 16 rows into a panel: c[r] holds row r's 32 unsigned codes in weight order;
  // `out` receives 8 vectors, run k (codes 4k..4k+3) of every row.
  static void store_runs(const __m256i (&c)[kPanelRows], uint8_t* out) {
    static constexpr TransposeIndex kStage1[2] = {stage1_index(0), stage1_index(1)};
    static constexpr TransposeIndex kStage2[2] = {stage2_index(0), stage2_index(1)};
    static constexpr TransposeIndex kStage3[2] = {stage3_index(0), stage3_index(1)};
    __m512i a[8], b[4][2], d[2][2][2];
    for (int i = 0; i < 8; ++i) a[i] = join(c[2 * i], c[2 * i + 1]);
    for (int h = 0; h < 2; ++h) {
      const __m512i idx = index_vector(kStage1[h]);
      for (int i = 0; i < 4; ++i) b[i][h] = _mm512_permutex2var_epi32(a[2 * i], idx, a[2 * i + 1]);
    }
    for (int m = 0; m < 2; ++m) {
      const __m512i idx = index_vector(kStage2[m]);
      for (int j = 0; j < 2; ++j) {
        for (int h = 0; h < 2; ++h) {
          d[j][h][m] = _mm512_permutex2var_epi32(b[2 * j][h], idx, b[2 * j + 1][h]);
        }
      }
    }
    for (int k = 0; k < 2; ++k) {
      const __m512i idx = index_vector(kStage3[k]);
      for (int h = 0; h < 2; ++h) {
        for (int m = 0; m < 2; ++m) {
          const int run = h * 4 + 2 * m + k;
          _mm512_store_si512(out + run * 64,
                             _mm512_permutex2var_epi32(d[0][h][m], idx, d[1][h][m]));
        }
      }
    }
  }
};

}  // namespace hearth::cpu::avx512
