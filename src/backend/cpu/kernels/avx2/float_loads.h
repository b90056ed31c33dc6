// Loads of F32, F16 and BF16 weight rows as float vectors, shared by the gemm tiles and axpy.
// Include only from files compiled with AVX2/FMA/F16C (the avx2/ folder).
#pragma once

#include <cstdint>
#include <cstring>

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// L::load8(row, i): elements i..i+7 of a row as floats; L::at(row, i): element i; L::kBytes:
// bytes per element.
struct LoadF32 {
  static constexpr int64_t kBytes = 4;
  static __m256 load8(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static float at(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};
struct LoadF16 {
  static constexpr int64_t kBytes = 2;
  static __m256 load8(const uint8_t* row, int64_t i) {
    return load_f16x8(reinterpret_cast<const uint16_t*>(row) + i);
  }
  static float at(const uint8_t* row, int64_t i) {
    return half_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
  }
};
struct LoadBf16 {
  static constexpr int64_t kBytes = 2;
  static __m256 load8(const uint8_t* row, int64_t i) {
    return load_bf16x8(reinterpret_cast<const uint16_t*>(row) + i);
  }
  static float at(const uint8_t* row, int64_t i) {
    return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
};

// Up to 7 trailing elements, zero-padded to a vector; they land in lanes 0.. like the
// reference's tail.
template <typename L>
__m256 load_tail(const uint8_t* row, int64_t i, int64_t count) {
  alignas(32) float buf[8] = {};
  for (int64_t j = 0; j < count; ++j) buf[j] = L::at(row, i + j);
  return _mm256_load_ps(buf);
}

// Weight type L on 8-lane vectors, for the float kernels written once for every vector width
// (float_tiles.h, axpy_token_tiles.h); tails go through a zero-filled buffer.
template <typename L>
struct Ymm {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static constexpr int64_t kWeightBytes = L::kBytes;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec splat(float v) { return _mm256_set1_ps(v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec weights(const uint8_t* row, int64_t i) { return L::load8(row, i); }
  static Vec weights_tail(const uint8_t* row, int64_t i, int64_t count) {
    return load_tail<L>(row, i, count);
  }
  static Vec acts(const float* x, int64_t i) { return _mm256_loadu_ps(x + i); }
  static Vec acts_tail(const float* x, int64_t i, int64_t count) {
    alignas(32) float buf[8] = {};
    std::memcpy(buf, x + i, static_cast<size_t>(count) * sizeof(float));
    return _mm256_load_ps(buf);
  }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static void store_tail(float* p, Vec v, int64_t count) {
    alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    std::memcpy(p, buf, static_cast<size_t>(count) * sizeof(float));
  }
  static void save(float* p, Vec v) { _mm256_store_ps(p, v); }
  static Vec restore(const float* p) { return _mm256_load_ps(p); }
  static float sum(Vec v) { return hsum(v); }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
