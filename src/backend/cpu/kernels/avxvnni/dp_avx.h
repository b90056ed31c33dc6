// AVX-VNNI's 8-bit and 16-bit products in the VEX encoding, in the forms the AVX2 engines take:
// dot (vnni_weights.h, panel_ymm.h) and dot_narrow, dot_wide and scaled (block_tiles.h). They
// compute the same exact int32 lanes as maddubs + madd. Include only from avxvnni/ sources.
#pragma once

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

// The tile engine's templates are defined in headers, so a target pragma here would not reach
// them; the build's -mavxvnni must.
#ifndef __AVXVNNI__
#error "avxvnni/ sources need -mavx2 -mfma -mf16c -mavxvnni (see CMakeLists.txt)"
#endif

namespace hearth::cpu::avxvnni {
namespace {

struct DpAvx {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  }
  static __m256i dot_narrow(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
    return dot(dot(_mm256_setzero_si256(), u0, s0), u1, s1);
  }
  // No int16 stage to overflow: the same instructions as dot_narrow.
  static __m256i dot_wide(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
    return dot_narrow(u0, s0, u1, s1);
  }
  static __m256i scaled(__m256i p0, __m256i c0, __m256i p1, __m256i c1) {
    return _mm256_dpwssd_avx_epi32(_mm256_madd_epi16(p0, c0), p1, c1);
  }
};

}  // namespace
}  // namespace hearth::cpu::avxvnni
