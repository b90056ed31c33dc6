// Every block format (block_formats_32.h, block_formats_256.h) in a kernel table, for one ISA's
// 8-bit products.
#pragma once

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats_256.h"
#include "backend/cpu/kernels/avx2/block_formats_32.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// dot, gemm and gemm_gather of every block type with products Dp (MaddAvx2 or a VNNI form; a
// type of the caller's anonymous namespace, so the instantiations stay in its file).
template <typename Dp>
void set_block_format_kernels(Kernels& k) {
  set_block_tile_kernels<FormatQ4_1<Dp>>(k.q4_1);
  set_block_tile_kernels<FormatQ5_0<Dp>>(k.q5_0);
  set_block_tile_kernels<FormatQ5_1<Dp>>(k.q5_1);
  set_block_tile_kernels<FormatIQ4_NL<Dp>>(k.iq4_nl);
  set_block_tile_kernels<FormatQ2_K<Dp>>(k.q2_k);
  set_block_tile_kernels<FormatQ3_K<Dp>>(k.q3_k);
  set_block_tile_kernels<FormatQ4_K<Dp>>(k.q4_k);
  set_block_tile_kernels<FormatQ5_K<Dp>>(k.q5_k);
  set_block_tile_kernels<FormatQ6_K<Dp>>(k.q6_k);
  set_block_tile_kernels<FormatIQ4_XS<Dp>>(k.iq4_xs);
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
