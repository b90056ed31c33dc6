#include "backend/cpu/dispatch.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/error.h"

namespace hearth::cpu {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avxvnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}

// AVX-512 F/BW/VL/DQ and VNNI from cpuid leaf 7, and the OS saving the opmask and zmm state:
// XCR0 bits 1-2 (xmm, ymm) and 5-7 (opmask, zmm 0-15 upper halves, zmm 16-31). A CPU that has
// the instructions under an OS (or hypervisor) that does not enable the state would fault.
bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  if (!cpu_has_avx2()) return false;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_OSXSAVE) == 0) return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kZmmState = 0xe6;
  if ((xcr0_lo & kZmmState) != kZmmState) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const unsigned need_b = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
  return (b & need_b) == need_b && (c & bit_AVX512VNNI) != 0;
#else
  return false;
#endif
}

}  // namespace

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return cpu_has_avx2();
    case Isa::AvxVnni:
      return cpu_has_avxvnni();
    case Isa::Avx512:
      return cpu_has_avx512();
  }
  return false;
}

Isa detect_isa() {
  Isa best = Isa::Scalar;
  for (Isa isa : {Isa::Avx2, Isa::AvxVnni, Isa::Avx512}) {
    if (cpu_supports(isa)) best = isa;
  }
  if (const char* env = std::getenv("HEARTH_ISA")) {
    // A cap: the named level, or the best one below it that this CPU has (the levels are not
    // nested: an AVX-512 CPU may lack AVX-VNNI).
    const Isa all[] = {Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512};
    for (int i = 3; i >= 0; --i) {
      if (std::string_view(env) != isa_name(all[i]) || all[i] > best) continue;
      while (!cpu_supports(all[i])) --i;
      return all[i];
    }
  }
  return best;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::AvxVnni:
      return "avxvnni";
    case Isa::Avx512:
      return "avx512";
  }
  return "unknown";
}

size_t act_row_bytes(ActFormat f, int64_t n) {
  const auto un = static_cast<size_t>(n);
  switch (f) {
    case ActFormat::F32:
      return un * sizeof(float);
    case ActFormat::Q8:
    case ActFormat::Q8K:
      return static_cast<size_t>(act_q8_row_bytes(n));
  }
  return 0;
}

const WeightKernels& Kernels::weights(DType t) const {
  switch (t) {
    case DType::F32:
      return f32;
    case DType::F16:
      return f16;
    case DType::BF16:
      return bf16;
    case DType::Q8_0:
      return q8_0;
    case DType::Q4_0:
      return q4_0;
    case DType::Q4_1:
      return q4_1;
    case DType::Q5_0:
      return q5_0;
    case DType::Q5_1:
      return q5_1;
    case DType::IQ4_NL:
      return iq4_nl;
    case DType::Q2_K:
      return q2_k;
    case DType::Q3_K:
      return q3_k;
    case DType::Q4_K:
      return q4_k;
    case DType::Q5_K:
      return q5_k;
    case DType::Q6_K:
      return q6_k;
    case DType::IQ4_XS:
      return iq4_xs;
  }
  fail("no CPU kernels for dtype id ", static_cast<uint32_t>(t));
}

Kernels select_kernels(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return generic::kernels();
    case Isa::Avx2:
      // The AVX2 translation units may use AVX2 anywhere, even in the table-filling code, so
      // they must not be entered on a CPU without it.
      if (!cpu_has_avx2()) fail("this CPU does not support AVX2/FMA/F16C");
      return avx2::kernels();
    case Isa::AvxVnni:
      if (!cpu_has_avxvnni()) fail("this CPU does not support AVX2/FMA/F16C/AVX-VNNI");
      return avxvnni::kernels();
    case Isa::Avx512:
      if (!cpu_has_avx512()) fail("this CPU (or OS) does not support AVX-512 F/BW/VL/DQ/VNNI");
      return avx512::kernels();
  }
  fail("unknown ISA");
}

}  // namespace hearth::cpu
