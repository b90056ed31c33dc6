// Q8_0 and Q4_0 weights against Q8 activation rows with AVX512-VNNI. Q8_0 takes the AVX-VNNI
// tiles (avx2/vnni_weights.h) with the EVEX form of the 256-bit vpdpbusd, which every
// AVX512-VNNI CPU has (AVX-VNNI's VEX form came later); Q4_0 the 512-bit tiles of
// wide_pair_tiles.h. Products of many tokens take the 512-bit panels of avx2/quant_panels.h
// (panel_zmm.h). Every output is identical to the AVX2 kernels'.
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/quant_panels.h"
#include "backend/cpu/kernels/avx2/vnni_weights.h"
#include "backend/cpu/kernels/avx512/dp_evex.h"
#include "backend/cpu/kernels/avx512/panel_zmm.h"
#include "backend/cpu/kernels/avx512/wide_pair_tiles.h"

namespace hearth::cpu::avx512 {

void set_quant_kernels(Kernels& k) {
  avx2::set_panel_kernels<avx2::QuantTiles<avx2::VnniQ8_0<DpEvex>>, avx2::PanelQ8_0, ZmmPanels>(
      k.q8_0);
  avx2::set_panel_kernels<WideBlockTiles<WideQ4_0>, avx2::PanelQ4_0, ZmmPanels>(k.q4_0);
}

}  // namespace hearth::cpu::avx512
