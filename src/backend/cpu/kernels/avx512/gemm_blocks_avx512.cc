// The block types of core/quant_blocks.h with AVX512-VNNI, every output identical to the AVX2
// kernels' (the 256-bit formats below are those of avx2/block_formats.h, with the EVEX forms of
// vpdpbusd and vpdpwssd, dp_evex.h). One token and few tokens take the 512-bit engine of
// wide_block_tiles.h: the super-block types with the formats of wide_block_formats.h, whose codes
// unpack 64 bytes at a time; Q4_1, Q5_0, Q5_1 and IQ4_NL with those of wide_pair_tiles.h.
// Products of many tokens take the 512-bit row panels (panel_zmm.h) of avx2/quant_panels.h and
// avx2/kquant_panels.h.
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats.h"
#include "backend/cpu/kernels/avx2/kquant_panels.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"
#include "backend/cpu/kernels/avx512/dp_evex.h"
#include "backend/cpu/kernels/avx512/panel_zmm.h"
#include "backend/cpu/kernels/avx512/wide_block_formats.h"
#include "backend/cpu/kernels/avx512/wide_pair_tiles.h"

namespace hearth::cpu::avx512 {
namespace {

using Dp = DpEvex;

using WideQ4_K = WideFormatQ4_K<avx2::FormatQ4_K<Dp>>;
using WideQ5_K = WideFormatQ5_K<avx2::FormatQ5_K<Dp>>;
using WideQ6_K = WideFormatQ6_K<avx2::FormatQ6_K<Dp>>;
using WideQ2_K = WideFormatQ2_K<avx2::FormatQ2_K<Dp>>;
using WideQ3_K = WideFormatQ3_K<avx2::FormatQ3_K<Dp>>;
using WideIQ4_XS = WideFormatIQ4_XS<avx2::FormatIQ4_XS<Dp>>;

template <typename T, typename P>
void set_panel_kernels(WeightKernels& k) {
  avx2::set_panel_kernels<T, P, ZmmPanels>(k);
}

}  // namespace

void set_block_kernels(Kernels& k) {
  set_panel_kernels<WideBlockTiles<WideQ4_1<avx2::FormatQ4_1<Dp>>>, avx2::PanelQ4_1>(k.q4_1);
  set_panel_kernels<WideBlockTiles<WideQ5<avx2::FormatQ5_0<Dp>>>, avx2::PanelQ5_0>(k.q5_0);
  set_panel_kernels<WideBlockTiles<WideQ5<avx2::FormatQ5_1<Dp>>>, avx2::PanelQ5_1>(k.q5_1);
  set_panel_kernels<WideBlockTiles<WideIQ4_NL<avx2::FormatIQ4_NL<Dp>>>, avx2::PanelIQ4_NL>(
      k.iq4_nl);
  set_panel_kernels<WideBlockTiles<WideQ2_K>, avx2::PanelQ2_K>(k.q2_k);
  set_panel_kernels<WideBlockTiles<WideQ3_K>, avx2::PanelQ3_K>(k.q3_k);
  set_panel_kernels<WideBlockTiles<WideQ4_K>, avx2::PanelQ4_K>(k.q4_k);
  set_panel_kernels<WideBlockTiles<WideQ5_K>, avx2::PanelQ5_K>(k.q5_k);
  set_panel_kernels<WideBlockTiles<WideQ6_K>, avx2::PanelQ6_K>(k.q6_k);
  set_panel_kernels<WideBlockTiles<WideIQ4_XS>, avx2::PanelIQ4_XS>(k.iq4_xs);
}

}  // namespace hearth::cpu::avx512
