// The products over row groups of the 32-weight block types in the AVX2 table: the 256-bit group
// kernels (row_group_32_tiles.h) with maddubs/madd products.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_32_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

// A private copy of the AVX2 products, so the kernels' instantiations stay in this file.
struct Dp : MaddAvx2 {};

}  // namespace

// Tiles of 3 tokens: 4 spill the int16 chains and sums of 16 rows (docs/benchmarks.md).
void set_row_group_32_kernels(Kernels& k) { set_group_32_kernels<Dp, 3>(k); }

}  // namespace hearth::cpu::avx2
