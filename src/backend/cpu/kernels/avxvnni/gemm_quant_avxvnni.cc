// Q8_0 and Q4_0 weights against Q8 activation rows with AVX-VNNI's vpdpbusd (avx2/vnni_weights.h),
// through the AVX2 tile engine: every output is identical to the AVX2 kernels'.
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/vnni_weights.h"

// The tile engine's templates are defined above, so a target pragma here would not reach them;
// the build's -mavxvnni must.
#ifndef __AVXVNNI__
#error "avxvnni/ sources need -mavx2 -mfma -mf16c -mavxvnni (see CMakeLists.txt)"
#endif

namespace hearth::cpu::avxvnni {
namespace {

// The VEX-encoded form.
struct DpAvx {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  }
};

}  // namespace

void set_quant_kernels(Kernels& k) {
  avx2::set_quant_tile_kernels<avx2::VnniQ8_0<DpAvx>>(k.q8_0);
  avx2::set_quant_tile_kernels<avx2::VnniQ4_0<DpAvx>>(k.q4_0);
}

}  // namespace hearth::cpu::avxvnni
