// AVX-VNNI's products in the VEX encoding (avx2::VnniDp), private to each avxvnni/ source that
// includes this. Include only from avxvnni/ sources.
#pragma once

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/vnni_weights.h"

// The tile engine's templates are defined in headers, so a target pragma here would not reach
// them; the build's -mavxvnni must.
#ifndef __AVXVNNI__
#error "avxvnni/ sources need -mavx2 -mfma -mf16c -mavxvnni (see CMakeLists.txt)"
#endif

namespace hearth::cpu::avxvnni {
namespace {

struct VexOps {
  static __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  }
  static __m256i dpwssd(__m256i acc, __m256i p, __m256i c) {
    return _mm256_dpwssd_avx_epi32(acc, p, c);
  }
};
using DpAvx = avx2::VnniDp<VexOps>;

}  // namespace
}  // namespace hearth::cpu::avxvnni
