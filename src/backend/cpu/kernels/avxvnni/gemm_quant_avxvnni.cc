// Q8_0 and Q4_0 weights against Q8 activation rows with AVX-VNNI: one vpdpbusd multiplies
// unsigned by signed bytes and adds each 4 adjacent products into an int32 lane, replacing
// AVX2's maddubs + madd (and the int16 add between them) with no intermediate saturation. The
// operands are prepared exactly as for AVX2 and the lanes hold the same 4-product sums, so the
// integer block sums, and with them every output, are identical to the AVX2 kernels'.
#include "backend/cpu/kernels/avxvnni/avxvnni_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/quant_tiles.h"

// The tile engine's templates are defined above, so a target pragma here would not reach them;
// the build's -mavxvnni must.
#ifndef __AVXVNNI__
#error "avxvnni/ sources need -mavx2 -mfma -mf16c -mavxvnni (see CMakeLists.txt)"
#endif

namespace hearth::cpu::avxvnni {
namespace {

struct WeightQ4_0 {
  using Block = BlockQ4_0;
  using Pair = avx2::Q4_0Pair;
  static constexpr bool kOffsetBy8 = true;
  static Pair prepare(const Block* b) { return avx2::prepare_q4_0(b); }
  // Lanes 0-3: partial sums of u . x for block b, lanes 4-7 for block b + 1.
  static __m256i products(const Pair& w, __m256i x_lo, __m256i x_hi) {
    const __m256i lo = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w.lo, x_lo);
    return _mm256_dpbusd_avx_epi32(lo, w.hi, x_hi);
  }
};

struct WeightQ8_0 {
  using Block = BlockQ8_0;
  using Pair = avx2::Q8_0Pair;
  static constexpr bool kOffsetBy8 = false;
  static Pair prepare(const Block* b) { return avx2::prepare_q8_0(b); }
  // vpdpbusd's first operand is unsigned: |w| * (x * sign(w)), as for maddubs.
  static __m256i products(const Pair& w, __m256i x_lo, __m256i x_hi) {
    const __m256i lo =
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w.abs_lo, _mm256_sign_epi8(x_lo, w.lo));
    return _mm256_dpbusd_avx_epi32(lo, w.abs_hi, _mm256_sign_epi8(x_hi, w.hi));
  }
};

}  // namespace

void set_quant_kernels(Kernels& k) {
  avx2::set_quant_tile_kernels<WeightQ8_0>(k.q8_0);
  avx2::set_quant_tile_kernels<WeightQ4_0>(k.q4_0);
}

}  // namespace hearth::cpu::avxvnni
