// Shared by the kernel and op tests: the ISAs this CPU can run and reproducible random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "core/dtype.h"
#include "core/quantize.h"

namespace hearth::test {

// Whether this CPU can run the kernels of `isa`: dispatch's own check (for AVX-512 it also
// requires the OS to save the zmm state).
using cpu::cpu_supports;

inline bool cpu_has_avx2() { return cpu_supports(cpu::Isa::Avx2); }

// Every ISA above the scalar reference, whether or not this CPU has it (tests skip those it
// lacks, so each variant is reported by name).
inline const cpu::Isa kFastIsas[] = {cpu::Isa::Avx2, cpu::Isa::AvxVnni, cpu::Isa::Avx512};

// The scalar reference always; the faster ISAs this CPU has.
inline std::vector<cpu::Isa> isas() {
  std::vector<cpu::Isa> out = {cpu::Isa::Scalar};
  for (cpu::Isa isa : kFastIsas) {
    if (cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

// n floats uniform in [lo, hi), the same for the same seed.
inline std::vector<float> uniform_floats(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Sets HEARTH_ISA (the level cpu::detect_isa, kernel tables and load-time layout choices see) for
// the scope, then puts back what was there.
class IsaCap {
 public:
  explicit IsaCap(const std::string& level) {
    if (const char* old = std::getenv("HEARTH_ISA")) old_ = old, had_ = true;
    setenv("HEARTH_ISA", level.c_str(), 1);
  }
  explicit IsaCap(cpu::Isa isa) : IsaCap(std::string(cpu::isa_name(isa))) {}
  ~IsaCap() {
    if (had_) {
      setenv("HEARTH_ISA", old_.c_str(), 1);
    } else {
      unsetenv("HEARTH_ISA");
    }
  }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  std::string old_;
  bool had_ = false;
};

#define HEARTH_REQUIRE_AVX2() \
  if (!::hearth::test::cpu_has_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C"

// Normal-ish values with occasional large outliers, like real activations.
inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng) * (pick(rng) == 0 ? 8.0f : 1.0f);
  return v;
}

// A [rows, cols] weight matrix in dtype t (ggml layout), made from random floats.
inline std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const auto f = random_floats(rows * cols, seed, 0.5f);
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes(t, cols)));
  quantize_rows(t, f.data(), w.data(), rows, cols);
  return w;
}

inline const DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

// Column counts for a dtype: block multiples for quantized types, and tails for float ones.
inline std::vector<int64_t> test_cols(DType t) {
  std::vector<int64_t> cols = {32, 96, 224, 1056};
  if (dtype_block_size(t) == 1) cols.insert(cols.end(), {1, 5, 13, 100});
  return cols;
}

}  // namespace hearth::test
