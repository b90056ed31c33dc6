// The AVX-VNNI kernel table: only the 8-bit integer dot products gain from VNNI, so everything
// else is the AVX2 table.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

namespace hearth::cpu::avxvnni {

Kernels kernels() {
  Kernels k = avx2::kernels();
  k.isa = Isa::AvxVnni;
  k.q8_0.dot = dot_q8_0;
  k.q8_0.gemm = gemm_q8_0;
  k.q4_0.dot = dot_q4_0;
  k.q4_0.gemm = gemm_q4_0;
  return k;
}

}  // namespace hearth::cpu::avxvnni
