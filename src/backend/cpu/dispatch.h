// ISA detection and the kernel table. The table is filled once (per CpuContext) with the best
// variant this machine supports; kernels are plain function pointers so the choice costs nothing
// per call. Every entry has a scalar reference in kernels/generic/.
#pragma once

#include <string_view>

namespace hearth::cpu {

enum class Isa { Scalar, Avx2 };

// Best ISA of this CPU. HEARTH_ISA=scalar in the environment forces the scalar kernels.
Isa detect_isa();
std::string_view isa_name(Isa isa);

struct Kernels {
  Isa isa = Isa::Scalar;
  // (function pointers: filled in by select_kernels)
};

Kernels select_kernels(Isa isa);

}  // namespace hearth::cpu
