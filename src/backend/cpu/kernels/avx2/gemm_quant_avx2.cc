// Q8_0 and Q4_0 weights against Q8 activation rows (layout: kernels/act_layout.h), with AVX2's
// 8-bit multiply-add: maddubs to int16 pairs, then madd to int32. The tile engine is in
// quant_tiles.h; Q4_0's products of many tokens take the 256-bit row panels (panel_ymm.h), whose
// int16 sums Q8_0's codes would saturate.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/panel_ymm.h"
#include "backend/cpu/kernels/avx2/quant_panels.h"
#include "backend/cpu/kernels/avx2/quant_tiles.h"

namespace hearth::cpu::avx2 {
namespace {

inline __m256i sum_pairs_i16(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

struct WeightQ4_0 : Q4_0Format {
  // Lanes 0-3: partial sums of u . x for block b, lanes 4-7 for block b + 1. Products of 4
  // nibbles (<= 15) and quants (|x| <= 127) fit in int16 before widening.
  static __m256i products(const Pair& w, __m256i x_lo, __m256i x_hi) {
    return sum_pairs_i16(
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo, x_lo), _mm256_maddubs_epi16(w.hi, x_hi)));
  }
};

struct WeightQ8_0 : Q8_0Format {
  // maddubs needs an unsigned operand: |w| * (x * sign(w)). Pair sums reach 2 * 128 * 127, so
  // each half is widened before the two are added.
  static __m256i products(const Pair& w, __m256i x_lo, __m256i x_hi) {
    const __m256i lo = _mm256_maddubs_epi16(w.abs_lo, _mm256_sign_epi8(x_lo, w.lo));
    const __m256i hi = _mm256_maddubs_epi16(w.abs_hi, _mm256_sign_epi8(x_hi, w.hi));
    return _mm256_add_epi32(sum_pairs_i16(lo), sum_pairs_i16(hi));
  }
};

}  // namespace

void set_quant_kernels(Kernels& k) {
  set_quant_tile_kernels<WeightQ8_0>(k.q8_0);
  set_panel_kernels<QuantTiles<WeightQ4_0>, PanelQ4_0, YmmMaddubs>(k.q4_0);
}

}  // namespace hearth::cpu::avx2
