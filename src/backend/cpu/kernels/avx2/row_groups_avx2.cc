// The products over row groups of the K-quants and IQ4_XS in the AVX2 table: the 256-bit
// group kernels (row_group_k32_tiles.h, row_group_sub16_tiles.h) with maddubs/madd products.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_k32_tiles.h"
#include "backend/cpu/kernels/avx2/row_group_sub16_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

// A private copy of the AVX2 products, so the kernels' instantiations stay in this file.
struct Dp : MaddAvx2 {};

}  // namespace

void set_row_group_kernels(Kernels& k) {
  k.q2_k.gemm_row_groups = Sub16Tiles<Dp, GroupQ2_K>::gemm<2>;
  k.q3_k.gemm_row_groups = Sub16Tiles<Dp, GroupQ3_K>::gemm<2>;
  k.q4_k.gemm_row_groups = K32Tiles<Dp, GroupQ4_K>::gemm<2>;
  k.q5_k.gemm_row_groups = K32Tiles<Dp, GroupQ5_K>::gemm<2>;
  k.q6_k.gemm_row_groups = Sub16Tiles<Dp, GroupQ6_K>::gemm<2>;
  k.iq4_xs.gemm_row_groups = K32Tiles<Dp, GroupIQ4_XS>::gemm<2>;
  set_row_group_32_kernels(k);
}

}  // namespace hearth::cpu::avx2
