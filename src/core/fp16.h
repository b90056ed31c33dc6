// Scalar IEEE half and bfloat16 conversions (the reference for the F16C/AVX2 paths). Round to
// nearest even, like F16C's _mm_cvtps_ph with _MM_FROUND_TO_NEAREST_INT and like ggml.
#pragma once

// The functions are `static` on purpose: files under avx2/ include this header too, and with plain
// `inline` the linker could keep their AVX-encoded copy for every caller, scalar paths included.

#include <cstdint>
#include <cstring>

namespace hearth {

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

static inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  // Shifted into place, a finite half's bits read as a float 2^112 too small, subnormals
  // included; scaling by a power of two is exact.
  const uint32_t finite = f32_bits(f32_from_bits(magnitude << 13) * 0x1p112f);
  // inf, or nan quieted like F16C does (a signaling nan gains the quiet bit)
  const uint32_t mant = magnitude & 0x3ffu;
  const uint32_t special = 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
  // Selects rather than branches, so loops over rows vectorize.
  return f32_from_bits(sign | (magnitude >= 0x7c00u ? special : finite));
}

static inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet and non-zero)
    const uint32_t payload = abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u;
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: round abs * 2^24 to an integer
    const float scaled = f32_from_bits(abs) * 16777216.0f;  // exact: power-of-two scale
    // nearest-even rounding of a float in [0, 1024): add and subtract 2^23
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  // normal: rebias exponent, round mantissa to 10 bits (nearest even)
  uint32_t v = abs - 0x38000000u;  // exponent 127 -> 15
  const uint32_t round_bit = 0x1000u, sticky = 0xfffu;
  uint32_t h = v >> 13;
  if ((v & round_bit) && ((v & sticky) || (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

static inline float bf16_to_fp32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

static inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan stays nan: set the quiet bit
  }
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // nearest even
}

}  // namespace hearth
