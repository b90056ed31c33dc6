// The block types of core/quant_blocks.h with AVX-VNNI: the AVX2 block tile engine
// (avx2/block_tiles.h) with the VEX vpdpbusd and vpdpwssd, and for products of many tokens the
// 256-bit row panels (avx2/panel_ymm.h). Both compute the exact integer sums of the maddubs
// forms, so every output is identical to the AVX2 kernels'.
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats.h"
#include "backend/cpu/kernels/avx2/kquant_panels.h"
#include "backend/cpu/kernels/avx2/panel_ymm.h"
#include "backend/cpu/kernels/avxvnni/dp_avx.h"

namespace hearth::cpu::avxvnni {
namespace {

template <template <typename> class Format, typename P>
void set_panels(WeightKernels& k) {
  avx2::set_panel_kernels<avx2::BlockTiles<Format<DpAvx>>, P, avx2::YmmDp<DpAvx>>(k);
}

}  // namespace

void set_block_kernels(Kernels& k) {
  set_panels<avx2::FormatQ4_1, avx2::PanelQ4_1>(k.q4_1);
  set_panels<avx2::FormatQ5_0, avx2::PanelQ5_0>(k.q5_0);
  set_panels<avx2::FormatQ5_1, avx2::PanelQ5_1>(k.q5_1);
  set_panels<avx2::FormatIQ4_NL, avx2::PanelIQ4_NL>(k.iq4_nl);
  set_panels<avx2::FormatQ2_K, avx2::PanelQ2_K>(k.q2_k);
  set_panels<avx2::FormatQ3_K, avx2::PanelQ3_K>(k.q3_k);
  set_panels<avx2::FormatQ4_K, avx2::PanelQ4_K>(k.q4_k);
  set_panels<avx2::FormatQ5_K, avx2::PanelQ5_K>(k.q5_k);
  set_panels<avx2::FormatQ6_K, avx2::PanelQ6_K>(k.q6_k);
  set_panels<avx2::FormatIQ4_XS, avx2::PanelIQ4_XS>(k.iq4_xs);
}

}  // namespace hearth::cpu::avxvnni
