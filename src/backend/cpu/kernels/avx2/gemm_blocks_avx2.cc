// The block types of core/quant_blocks.h (legacy Q4_1/Q5_0/Q5_1, the K-quants, IQ4_NL/IQ4_XS)
// in the AVX2 table: the block tile engine (block_tiles.h) with maddubs/madd products, and for
// products of many tokens the 256-bit row panels (panel_ymm.h) of the types whose codes fit
// maddubs' int16 sums (all but IQ4_NL and IQ4_XS).
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats.h"
#include "backend/cpu/kernels/avx2/kquant_panels.h"
#include "backend/cpu/kernels/avx2/panel_ymm.h"

namespace hearth::cpu::avx2 {
namespace {

// A private copy of the AVX2 products, so the formats' instantiations stay in this file.
struct Dp : MaddAvx2 {};

// Panels where P's codes fit maddubs' int16 sums, the tiles alone where they do not.
template <template <typename> class Format, typename P>
void set_kernels(WeightKernels& k) {
  if constexpr (YmmMaddubs::fits<P>()) {
    set_panel_kernels<BlockTiles<Format<Dp>>, P, YmmMaddubs>(k);
  } else {
    set_block_tile_kernels<Format<Dp>>(k);
  }
}

}  // namespace

void set_block_kernels(Kernels& k) {
  // The vector quantizer of the activation format the scalar table chose (the same bits).
  for (WeightKernels* w : {&k.q4_1, &k.q5_0, &k.q5_1, &k.iq4_nl, &k.q2_k, &k.q3_k, &k.q4_k, &k.q5_k,
                           &k.q6_k, &k.iq4_xs}) {
    w->to_act = w->act == ActFormat::Q8K ? quantize_act_q8k : quantize_act_q8;
  }
  set_kernels<FormatQ4_1, PanelQ4_1>(k.q4_1);
  set_kernels<FormatQ5_0, PanelQ5_0>(k.q5_0);
  set_kernels<FormatQ5_1, PanelQ5_1>(k.q5_1);
  set_kernels<FormatIQ4_NL, PanelIQ4_NL>(k.iq4_nl);
  set_kernels<FormatQ2_K, PanelQ2_K>(k.q2_k);
  set_kernels<FormatQ3_K, PanelQ3_K>(k.q3_k);
  set_kernels<FormatQ4_K, PanelQ4_K>(k.q4_k);
  set_kernels<FormatQ5_K, PanelQ5_K>(k.q5_k);
  set_kernels<FormatQ6_K, PanelQ6_K>(k.q6_k);
  set_kernels<FormatIQ4_XS, PanelIQ4_XS>(k.iq4_xs);
}

}  // namespace hearth::cpu::avx2
