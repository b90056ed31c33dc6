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
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf, or nan quieted like F16C does (a signaling nan gains the quiet bit)
    return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  }
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // subnormal: value = mant * 2^-24
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0));
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

static inline float bf16_to_fp32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

static inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // nearest even
}

}  // namespace hearth
