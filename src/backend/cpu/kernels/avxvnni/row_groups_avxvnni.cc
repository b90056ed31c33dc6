// The products over row groups of the 32-weight block types, Q2_K, Q4_K, Q5_K, Q6_K and IQ4_XS
// in the AVX-VNNI table: the 256-bit group kernels (avx2/row_group_32_tiles.h,
// row_group_k32_tiles.h, row_group_sub16_tiles.h) with the VEX vpdpbusd. Every output is the AVX2
// kernels' (and the scalar reference's) bits.
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_32_tiles.h"
#include "backend/cpu/kernels/avx2/row_group_k32_tiles.h"
#include "backend/cpu/kernels/avx2/row_group_sub16_tiles.h"
#include "backend/cpu/kernels/avxvnni/dp_avx.h"

namespace hearth::cpu::avxvnni {

void set_row_group_kernels(Kernels& k) {
  // Tiles of 4 tokens: one int32 chain per row half and token leaves room for a fourth.
  avx2::set_group_32_kernels<DpAvx, 4>(k);
  // Q6_K: tiles of 3 (2 ran at 0.8x of the row panels).
  k.q6_k.gemm_row_groups = avx2::Sub16Tiles<DpAvx, GroupQ6_K>::gemm<3>;
  // Q3_K keeps its rows here: the row panels' prompts ran 1.4-1.8x as fast as the groups' tiles
  // of 2-4 tokens, more than the groups' one-token products gain (1.3-1.4x, docs/benchmarks.md).
  k.q3_k.to_row_group = nullptr;
  k.q3_k.gemm_row_groups = nullptr;
  k.q2_k.gemm_row_groups = avx2::Sub16Tiles<DpAvx, GroupQ2_K>::gemm<2>;
  k.q4_k.gemm_row_groups = avx2::K32Tiles<DpAvx, GroupQ4_K>::gemm<2>;
  k.q5_k.gemm_row_groups = avx2::K32Tiles<DpAvx, GroupQ5_K>::gemm<2>;
  k.iq4_xs.gemm_row_groups = avx2::K32Tiles<DpAvx, GroupIQ4_XS>::gemm<2>;
}

}  // namespace hearth::cpu::avxvnni
