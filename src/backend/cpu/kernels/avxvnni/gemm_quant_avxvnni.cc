// Q8_0 and Q4_0 weights against Q8 activation rows with AVX-VNNI's vpdpbusd (avx2/vnni_weights.h),
// through the AVX2 tile engine, and for products of many tokens through the 256-bit row panels
// (avx2/panel_ymm.h): every output is identical to the AVX2 kernels'.
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/panel_ymm.h"
#include "backend/cpu/kernels/avx2/quant_panels.h"
#include "backend/cpu/kernels/avx2/vnni_weights.h"
#include "backend/cpu/kernels/avxvnni/dp_avx.h"

namespace hearth::cpu::avxvnni {
namespace {

using Panels = avx2::YmmDp<DpAvx>;

}  // namespace

void set_quant_kernels(Kernels& k) {
  avx2::set_panel_kernels<avx2::QuantTiles<avx2::VnniQ8_0<DpAvx>>, avx2::PanelQ8_0, Panels>(k.q8_0);
  avx2::set_panel_kernels<avx2::QuantTiles<avx2::VnniQ4_0<DpAvx>>, avx2::PanelQ4_0, Panels>(k.q4_0);
}

}  // namespace hearth::cpu::avxvnni
