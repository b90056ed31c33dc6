// Q8_0 and Q4_0 weights against Q8 activation rows with AVX512-VNNI: the AVX-VNNI kernels
// (avx2/vnni_weights.h) with the EVEX form of the 256-bit vpdpbusd, which every AVX512-VNNI CPU
// has (AVX-VNNI's VEX form came later). Every output is identical to the AVX2 kernels'.
//
// Not yet tried: 512-bit vpdpbusd. A zmm vpdpbusd can issue at a lower rate than a ymm one, so it
// may gain far less than its doubled width in bytes per cycle, and the act_layout.h pairs would
// need a reduction tree across 128-bit lanes (no 512-bit hadd), so the gain is uncertain.
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/vnni_weights.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {
namespace {

// The EVEX-encoded form (AVX512-VNNI + VL).
struct DpEvex {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};

}  // namespace

void set_quant_kernels(Kernels& k) {
  avx2::set_quant_tile_kernels<avx2::VnniQ8_0<DpEvex>>(k.q8_0);
  avx2::set_quant_tile_kernels<avx2::VnniQ4_0<DpEvex>>(k.q4_0);
}

}  // namespace hearth::cpu::avx512
