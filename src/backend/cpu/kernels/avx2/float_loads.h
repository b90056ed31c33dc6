// Loads of F32, F16 and BF16 weight rows as float vectors, shared by the gemm tiles and axpy.
// Include only from files compiled with AVX2/FMA/F16C (the avx2/ folder).
#pragma once

#include <cstdint>

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

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
