// The products over row groups of the 32-weight block types in the AVX-VNNI table: the 256-bit
// group kernels (avx2/row_group_32_tiles.h) with the VEX vpdpbusd. Every output is the AVX2
// kernels' (and the scalar reference's) bits.
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/row_group_32_tiles.h"
#include "backend/cpu/kernels/avxvnni/dp_avx.h"

namespace hearth::cpu::avxvnni {

// Tiles of 4 tokens: one int32 chain per row half and token leaves room for a fourth.
void set_row_group_kernels(Kernels& k) { avx2::set_group_32_kernels<DpAvx, 4>(k); }

}  // namespace hearth::cpu::avxvnni
