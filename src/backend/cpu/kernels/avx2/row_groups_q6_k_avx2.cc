// The products over Q6_K row groups in the AVX2 table: the 256-bit group kernels
// (row_group_q6_k_tiles.h) with maddubs/madd products.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_q6_k_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

// A private copy of the AVX2 products, so the kernels' instantiations stay in this file.
struct Dp : MaddAvx2 {};

}  // namespace

void set_row_group_q6_k_kernels(Kernels& k) { k.q6_k.gemm_row_groups = Q6_KTiles<Dp>::gemm<2>; }

}  // namespace hearth::cpu::avx2
