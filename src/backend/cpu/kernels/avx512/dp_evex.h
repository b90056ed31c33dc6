// AVX512-VNNI's 256-bit products in the EVEX encoding (avx2::VnniDp), which every AVX512-VNNI CPU
// has (AVX-VNNI's VEX form came later), private to each avx512/ source that includes this.
// Include only from files compiled with the avx512/ flags.
#pragma once

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/vnni_weights.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {
namespace {

struct EvexOps {
  static __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
  }
  static __m256i dpwssd(__m256i acc, __m256i p, __m256i c) {
    return _mm256_dpwssd_epi32(acc, p, c);
  }
};
using DpEvex = avx2::VnniDp<EvexOps>;

}  // namespace
}  // namespace hearth::cpu::avx512
