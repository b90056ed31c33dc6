// Inline AVX2/FMA/F16C helpers shared by the kernels in this folder. Include only from files that
// are compiled with -mavx2 -mfma -mf16c (everything under avx2/).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels/tile_set.h"

// The build compiles avx2/ folders with -mavx2 -mfma -mf16c. Where those flags are missing, GCC
// still gets the right code generation from this pragma: it applies to everything defined after
// this point, so headers shared with scalar code are included above it (an out-of-line copy of a
// shared inline function compiled for AVX2 could otherwise be picked by the linker for scalar
// callers).
#if !defined(__AVX2__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
#endif

// The avx2/ headers are also compiled into avxvnni/ and avx512/ files, with more target flags.
// Their inline functions have external linkage, and the linker keeps one copy of each: an
// out-of-line copy built with AVX-512 (EVEX encodings, zmm registers) must never be the one an
// AVX2-only CPU runs. So every definition below sits in an inline namespace named after the
// flags it is compiled with, which gives each variant its own symbols.
#if defined(__AVX512F__)
#define HEARTH_AVX2_ABI abi_avx512
#elif defined(__AVXVNNI__)
#define HEARTH_AVX2_ABI abi_avxvnni
#else
#define HEARTH_AVX2_ABI abi_avx2
#endif

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

using tiles::gemm_by_tokens;
using tiles::gemm_contiguous;
using tiles::gemm_gather;
using tiles::RowList;
using tiles::RowsGemmFn;
using tiles::set_tile_kernels;
using tiles::tile_dot;
using tiles::TileFn;
using tiles::TileSet;

// Sum of the 8 lanes, added as (l0+l4, ...) then halves again: the order the scalar reference
// uses, so float kernels differ from it only by FMA rounding.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t float_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
inline float bf16_to_f32(uint16_t h) {
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16)));
}

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// bf16 is the top half of an f32: widen and shift.
inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The 32 nibbles of a Q4_0 block as bytes in [0, 15], in weight order: byte j holds the low
// nibble of qs[j] for j < 16 and the high nibble of qs[j - 16] above.
// The 16 bytes are loaded into both halves (a plain load, no shuffle) and the halves shifted
// differently by one per-lane shift (0 and 4 bits), keeping the shuffle ports free for the
// reduction trees.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// Signed 8-bit dot product of 32 pairs into 8 int32 partial sums. maddubs needs one unsigned
// operand, so the sign of `w` moves onto `x`: |w| * (x * sign(w)). Exact for w in [-128, 127]
// and x in [-127, 127] (pair sums stay below 2^15).
inline __m256i dot_i8(__m256i abs_w, __m256i w, __m256i x) {
  const __m256i prod16 = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
