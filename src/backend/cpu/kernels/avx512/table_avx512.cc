// The AVX-512 kernel table. It starts from the AVX2 table, not the AVX-VNNI one: AVX-512 CPUs
// before Sapphire Rapids (Ice Lake, Cascade Lake) lack AVX-VNNI. Entries this level does not
// replace (conversions, the axpy of other types and token counts) stay AVX2.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

namespace hearth::cpu::avx512 {

Kernels kernels() {
  Kernels k = avx2::kernels();
  k.isa = Isa::Avx512;
  set_float_kernels(k);
  set_quant_kernels(k);
  set_block_kernels(k);
  set_row_group_kernels(k);
  set_axpy_kernels(k);
  set_kquant_axpy_kernels(k);
  set_float_axpy_kernels(k);
  return k;
}

}  // namespace hearth::cpu::avx512
