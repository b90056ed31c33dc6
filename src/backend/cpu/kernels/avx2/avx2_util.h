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

// The build compiles avx2/ folders with -mavx2 -mfma -mf16c. Where those flags are missing, GCC
// still gets the right code generation from this pragma: it applies to everything defined after
// this point, so headers shared with scalar code are included above it (an out-of-line copy of a
// shared inline function compiled for AVX2 could otherwise be picked by the linker for scalar
// callers).
#if !defined(__AVX2__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
#endif

namespace hearth::cpu::avx2 {

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
// differently by a blend, keeping the shuffle ports free for the reduction trees.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_blend_epi32(both, _mm256_srli_epi16(both, 4), 0xf0);
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// Signed 8-bit dot product of 32 pairs into 8 int32 partial sums. maddubs needs one unsigned
// operand, so the sign of `w` moves onto `x`: |w| * (x * sign(w)). Exact for w in [-128, 127]
// and x in [-127, 127] (pair sums stay below 2^15).
inline __m256i dot_i8(__m256i abs_w, __m256i w, __m256i x) {
  const __m256i prod16 = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
}

// Prefetches for streamed weight rows reach at most this far ahead, so the lines are still in L1
// when the tile gets to them.
inline constexpr size_t kMaxPrefetchBytes = 8192;

// The weight rows of a gemm: row r at base + r * ldw, or, for a gather, at base + idx[r] * ldw.
struct RowList {
  const uint8_t* base;
  size_t ldw;
  const int32_t* idx;  // null: contiguous rows

  const uint8_t* row(int64_t r) const {
    return base + (idx ? static_cast<size_t>(idx[r]) : static_cast<size_t>(r)) * ldw;
  }
};

// A tile kernel computes y[t * ldy + r] for an R x T block of (weight row w[r], activation row
// x + t * ldx). ahead[r] is where the tile may prefetch while it reads row r: the address the
// same offset on will be read by a later tile (kernels that stream from DRAM use it, the others
// ignore it).
using TileFn = void (*)(int64_t n, const uint8_t* const* w, const uint8_t* const* ahead,
                        const uint8_t* x, size_t ldx, float* y, size_t ldy);

// Covers an nr x nt output with K's register-blocked tiles of at most R x T, using smaller
// instantiations at the edges. Rows are the outer loop so a weight tile stays in L1 while it
// meets every activation row. Tiles see only row pointers, so gathered rows take the same
// tiles (and give the same bits) as contiguous ones.
template <typename K, int R, int T>
class TileSet {
 public:
  static void gemm(int64_t n, const RowList& rows, int64_t nr, const void* x, size_t ldx,
                   int64_t nt, float* y, size_t ldy) {
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int64_t r0 = 0; r0 < nr; r0 += R) {
      const int64_t rr = nr - r0 < R ? nr - r0 : R;
      const uint8_t* w[R];
      const uint8_t* ahead[R];
      for (int64_t r = 0; r < rr; ++r) w[r] = rows.row(r0 + r);
      if (rows.idx == nullptr) {
        // Contiguous rows: the same offset rr rows on is the next tile's row, capped.
        const size_t skip = std::min(static_cast<size_t>(rr) * rows.ldw, kMaxPrefetchBytes);
        for (int64_t r = 0; r < rr; ++r) ahead[r] = w[r] + skip;
      } else {
        // Gathered rows are scattered: fetch the next tile's rows while this one computes (the
        // last tile has none and refetches its own lines, which costs nothing).
        for (int64_t r = 0; r < rr; ++r) ahead[r] = r0 + R + r < nr ? rows.row(r0 + R + r) : w[r];
      }
      for (int64_t t0 = 0; t0 < nt; t0 += T) {
        const int64_t tt = nt - t0 < T ? nt - t0 : T;
        kTiles[(rr - 1) * T + (tt - 1)](n, w, ahead, xb + t0 * ldx, ldx, y + t0 * ldy + r0, ldy);
      }
    }
  }

 private:
  template <size_t... I>
  static constexpr std::array<TileFn, R * T> make(std::index_sequence<I...>) {
    return {&K::template tile<static_cast<int>(I) / T + 1, static_cast<int>(I) % T + 1>...};
  }
  static constexpr std::array<TileFn, R* T> kTiles = make(std::make_index_sequence<R * T>{});
};

// One weight row against one activation row through K's 1 x 1 tile: the dot kernel.
template <typename K>
float tile_dot(int64_t n, const void* w, const void* x) {
  const auto* row = static_cast<const uint8_t*>(w);
  float y;
  K::template tile<1, 1>(n, &row, &row, static_cast<const uint8_t*>(x), 0, &y, 0);
  return y;
}

// A tile engine's gemm over a RowList (it picks the tile shapes).
using RowsGemmFn = void (*)(int64_t n, const RowList& rows, int64_t nr, const void* x, size_t ldx,
                            int64_t nt, float* y, size_t ldy);

// The kernel-table entries of a tile engine: contiguous and gathered rows through the same
// tiles, and the 1 x 1 tile as the dot product.
template <RowsGemmFn Gemm>
void gemm_contiguous(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
                     int64_t nt, float* y, size_t ldy) {
  Gemm(n, {static_cast<const uint8_t*>(w), ldw, nullptr}, nr, x, ldx, nt, y, ldy);
}
template <RowsGemmFn Gemm>
void gemm_gather(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                 const void* x, size_t ldx, int64_t nt, float* y, size_t ldy) {
  Gemm(n, {static_cast<const uint8_t*>(w), ldw, idx}, nr, x, ldx, nt, y, ldy);
}
template <typename K, RowsGemmFn Gemm>
void set_tile_kernels(WeightKernels& k) {
  k.dot = tile_dot<K>;
  k.gemm = gemm_contiguous<Gemm>;
  k.gemm_gather = gemm_gather<Gemm>;
}

}  // namespace hearth::cpu::avx2
