// The scalar f16/bf16 conversions must agree with the F16C hardware (which ggml uses on x86)
// bit for bit, including subnormals, infinities, NaNs and every rounding tie.
#include "core/fp16.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/kernel_test_util.h"

namespace hearth {
namespace {

__attribute__((target("f16c"))) float hw_half_to_float(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hw_float_to_half(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

TEST(Fp16, EveryHalfMatchesF16c) {
  HEARTH_REQUIRE_AVX2();
  for (uint32_t h = 0; h < 65536; ++h) {
    const float sw = fp16_to_fp32(static_cast<uint16_t>(h));
    const float hw = hw_half_to_float(static_cast<uint16_t>(h));
    ASSERT_TRUE(same_bits(sw, hw))
        << std::hex << "half 0x" << h << ": 0x" << f32_bits(sw) << " vs 0x" << f32_bits(hw);
  }
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (nan) continue;  // NaN payloads are quieted, checked against hardware elsewhere
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Fp16, FloatsMatchF16c) {
  HEARTH_REQUIRE_AVX2();
  std::vector<uint32_t> bits;
  // Every float whose bits are a half's f32 image plus each pattern of the 13 dropped bits that
  // matters for rounding (exact, just below/at/above the tie, sticky bits), across all exponents.
  for (uint32_t e = 0; e < 256; ++e) {
    for (uint32_t m : {0u, 1u, 0x1000u, 0xfffu, 0x1001u, 0x2000u, 0x3000u, 0x7fe000u, 0x7ff000u,
                       0x7fefffu, 0x7fffffu, 0x400000u, 0x401000u, 0x403000u}) {
      bits.push_back(e << 23 | m);
      bits.push_back(0x80000000u | e << 23 | m);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  // Dense sweep of the range around the f16 subnormal/normal boundary and overflow.
  for (uint32_t u = 0x33000000u; u < 0x39000000u; u += 97) bits.push_back(u);
  for (uint32_t u = 0x477f0000u; u < 0x47810000u; u += 3) bits.push_back(u);
  for (uint32_t u : bits) {
    const float f = f32_from_bits(u);
    ASSERT_EQ(fp32_to_fp16(f), hw_float_to_half(f)) << std::hex << "float bits 0x" << u;
  }
}

// Independent bf16 reference: pick the nearer of the two neighbouring bf16 values using exact
// double arithmetic, ties to the even one.
uint16_t bf16_reference(float f) {
  const uint32_t u = f32_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  if ((u & 0xffffu) == 0) return lo;
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dlo = std::fabs(static_cast<double>(f) - bf16_to_fp32(lo));
  // The upper neighbour may be infinity; then compare against the would-be next value 2^128.
  const double up = std::isinf(bf16_to_fp32(hi)) ? std::copysign(std::ldexp(1.0, 128), f)
                                                 : static_cast<double>(bf16_to_fp32(hi));
  const double dhi = std::fabs(up - static_cast<double>(f));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) ? hi : lo;
}

TEST(Bf16, MatchesIndependentRounding) {
  std::mt19937 rng(11);
  std::vector<uint32_t> bits = {0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x00008000u, 0x00018000u,
                                0x3f808000u, 0x3f818000u, 0x7f800000u, 0x00000001u, 0x80000000u};
  for (int i = 0; i < 2000000; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t u : bits) {
    const float f = f32_from_bits(u);
    ASSERT_EQ(fp32_to_bf16(f), bf16_reference(f)) << std::hex << "float bits 0x" << u;
  }
}

TEST(Bf16, WideningIsExact) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(f32_bits(bf16_to_fp32(static_cast<uint16_t>(h))), h << 16);
  }
}

}  // namespace
}  // namespace hearth
