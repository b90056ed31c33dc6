// Shared by the kernel and op tests: the ISAs this CPU can run, and reproducible random inputs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/dispatch.h"

namespace hearth::test {

// The scalar reference always; AVX2 too when this CPU has AVX2, FMA and F16C.
inline std::vector<cpu::Isa> isas() {
  std::vector<cpu::Isa> out = {cpu::Isa::Scalar};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    out.push_back(cpu::Isa::Avx2);
  }
  return out;
}

// n floats uniform in [lo, hi), the same for the same seed on every platform's libstdc++.
inline std::vector<float> uniform_floats(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace hearth::test
