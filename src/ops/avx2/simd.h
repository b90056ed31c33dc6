// AVX2/FMA/F16C building blocks shared by the ops' SIMD files. Include only from files under an
// avx2/ or avx512/ folder: they are the only ones compiled with these instructions enabled.
#pragma once

#include <immintrin.h>

#include <cstdint>

// These inline functions have external linkage, and the linker keeps one copy of each: a copy
// built in an avx512/ file (EVEX encodings) must never be the one an AVX2-only CPU runs, so each
// set of flags gets its own symbols (as backend/cpu/kernels/avx2/avx2_util.h does).
#if defined(__AVX512F__)
#define HEARTH_OPS_AVX2_ABI abi_avx512
#else
#define HEARTH_OPS_AVX2_ABI abi_avx2
#endif

namespace hearth::ops_avx2 {
inline namespace HEARTH_OPS_AVX2_ABI {

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline void store_f16x8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

// Lane mask with the first n (0..8) lanes set, for maskload/maskstore of a row's tail.
inline __m256i tail_mask(int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
}

// Horizontal sum with a fixed tree, ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)), shared with hsum8x so
// that a dot product gives the same bits whichever of the two reduced it (the attention results
// must not depend on how queries were grouped into tiles, hence on the thread count).
inline float hsum(__m256 v) {
  __m256 h = _mm256_hadd_ps(v, v);
  h = _mm256_hadd_ps(h, h);
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

// Lane k of the result is hsum(v[k]), with the same addition tree.
inline __m256 hsum8x(const __m256 v[8]) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]);
  const __m256 t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]);
  const __m256 t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);
  const __m256 u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The 8 x 8 transpose: r[p]'s element c becomes r[c]'s element p.
inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int p = 0; p < 8; p += 2) {
    t[p] = _mm256_unpacklo_ps(r[p], r[p + 1]);
    t[p + 1] = _mm256_unpackhi_ps(r[p], r[p + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    s[h] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(s[c], s[c + 4], 0x20);
    r[c + 4] = _mm256_permute2f128_ps(s[c], s[c + 4], 0x31);
  }
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// e^x with a maximum relative error of about 2 ulp over the normal range (Cephes' expf scheme:
// reduction by a two-part ln 2, degree-5 polynomial). Results below FLT_MIN flush to 0 (a masked
// score of -inf must weigh exactly nothing), above FLT_MAX give +inf, NaN stays NaN.
inline __m256 exp_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);  // ln(FLT_MIN)
  const __m256 hi = _mm256_set1_ps(88.72283f);   // ln(FLT_MAX)
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  // 2^n as two factors: n reaches 128 and -126 at the ends of the range, whose single-factor
  // exponent fields would not be normal numbers.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  y = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// x / (1 + e^-x), with the same division as the scalar reference.
inline __m256 silu_ps(__m256 x) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

}  // namespace HEARTH_OPS_AVX2_ABI
}  // namespace hearth::ops_avx2
