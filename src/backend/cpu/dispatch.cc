#include "backend/cpu/dispatch.h"

#include <cstdlib>
#include <string_view>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
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

}  // namespace

Isa detect_isa() {
  const Isa best = cpu_has_avxvnni() ? Isa::AvxVnni : cpu_has_avx2() ? Isa::Avx2 : Isa::Scalar;
  if (const char* env = std::getenv("HEARTH_ISA")) {
    const std::string_view want(env);
    if (want == "scalar") return Isa::Scalar;
    if (want == "avx2" && has_avx2(best)) return Isa::Avx2;
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
  }
  return "unknown";
}

size_t act_row_bytes(ActFormat f, int64_t n) {
  const auto un = static_cast<size_t>(n);
  switch (f) {
    case ActFormat::F32:
      return un * sizeof(float);
    case ActFormat::Q8:
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
  }
  fail("unknown ISA");
}

}  // namespace hearth::cpu
