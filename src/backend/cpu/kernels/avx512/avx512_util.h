// Inline AVX-512 helpers shared by the kernels in this folder. Include only from files compiled
// with the avx512/ flags (CMakeLists.txt); every name lives in hearth::cpu::avx512, which only
// those files define, so no copy of these can be linked into code for a lesser ISA.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/dispatch.h"
#include "core/quant_blocks.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512DQ__) || !defined(__AVX512VNNI__)
#error "avx512/ sources need -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni"
#endif

namespace hearth::cpu::avx512 {

// The IQ4 code book offset by 128 (unsigned, for vpdpbusd) in every 128-bit lane. (The masked
// form: GCC 12 warns that the unmasked broadcast reads an undefined vector.)
inline __m512i iq4_offset_book() {
  return _mm512_maskz_broadcast_i32x4(
      0xffff, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)),
                            _mm_set1_epi8(-128)));
}

// Sum of the 16 lanes: the upper 8 onto the lower 8, then as AVX2's hsum (l0 + l4, ... then
// halves again). One fixed order for every output of this ISA.
// (GCC 12's _mm512_castps512_ps256 trips -Wuninitialized, so the lower half is extracted too;
// this runs once per output.)
inline float hsum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes [0, count) of a 16-lane vector, count in [0, 16].
inline __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>((uint32_t{1} << count) - 1);
}

// Elements i.. of F32, F16 and BF16 rows as 16 floats; the masked forms read only the lanes in
// `m` and leave the others zero (a masked load never touches memory outside its lanes); kBytes
// is the bytes of one element.
struct LoadF32 {
  static constexpr int64_t kBytes = 4;
  static __m512 load16(const uint8_t* row, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static __m512 load16(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  }
};
struct LoadF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 load16(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m512 load16(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
};
// bf16 is the top half of an f32: widen and shift.
struct LoadBf16 {
  static constexpr int64_t kBytes = 2;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load16(const uint8_t* row, int64_t i) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m512 load16(const uint8_t* row, int64_t i, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
};

// Weight type L on 16-lane vectors, for the float kernels written once for every vector width
// (float_tiles.h, axpy_token_tiles.h); tails are masked loads and stores.
template <typename L>
struct Zmm {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static constexpr int64_t kWeightBytes = L::kBytes;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec splat(float v) { return _mm512_set1_ps(v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec weights(const uint8_t* row, int64_t i) { return L::load16(row, i); }
  static Vec weights_tail(const uint8_t* row, int64_t i, int64_t count) {
    return L::load16(row, i, first_lanes(count));
  }
  static Vec acts(const float* x, int64_t i) { return _mm512_loadu_ps(x + i); }
  static Vec acts_tail(const float* x, int64_t i, int64_t count) {
    return _mm512_maskz_loadu_ps(first_lanes(count), x + i);
  }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void store_tail(float* p, Vec v, int64_t count) {
    _mm512_mask_storeu_ps(p, first_lanes(count), v);
  }
  static void save(float* p, Vec v) { _mm512_store_ps(p, v); }
  static Vec restore(const float* p) { return _mm512_load_ps(p); }
  static float sum(Vec v) { return hsum(v); }
};

}  // namespace hearth::cpu::avx512
