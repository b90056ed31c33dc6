// The AVX-VNNI kernel table: only the 8-bit integer products gain from VNNI, so everything else
// (the axpys included) is the AVX2 table.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

namespace hearth::cpu::avxvnni {

Kernels kernels() {
  Kernels k = avx2::kernels();
  k.isa = Isa::AvxVnni;
  set_quant_kernels(k);
  set_block_kernels(k);
  set_row_group_kernels(k);
  return k;
}

}  // namespace hearth::cpu::avxvnni
