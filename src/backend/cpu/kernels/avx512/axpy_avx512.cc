// The one-token Q4_0 axpy of the AVX-512 table: the integer kernel of axpy_q4_0_int.h with both
// of its passes in AVX-512. Pass 1 needs the f16 scales of 8 consecutive blocks of each of a
// group's rows; they sit 18 bytes apart, which AVX2 gathers through general registers (8 loads,
// shifts and ors per row and chunk). Here two 64-byte loads cover the chunk (8 blocks are 144
// bytes, the 8th scale ends at byte 128) and one vpermt2w picks words 0, 9, ..., 63. Pass 2 sums
// with 512-bit vpdpbusd (below). The integer sums and the final FMA are those of the AVX2 kernel,
// so the outputs are the same bits. Other token counts stay AVX2.
// One thread, 563 or 1690 of 5632 rows of 2048 columns, min of 6 interleaved runs: 61 -> 57 µs
// and 195 -> 180 µs against the AVX2 kernel; 32 rows in L1: 2.9 -> 2.5 µs.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/axpy_q4_0_int.h"

namespace hearth::cpu::avx512 {
namespace {

struct ScalesPermute {
  // blocks: the chunk's first Q4_0 block of one row; count <= 8 blocks.
  static __m256 chunk(const uint8_t* blocks, int count) {
    alignas(64) static constexpr uint16_t kWords[32] = {0, 9, 18, 27, 36, 45, 54, 63};
    const __m512i words = _mm512_load_si512(kWords);
    __m512i lo, hi;
    if (count == 8) {
      lo = _mm512_loadu_si512(blocks);
      hi = _mm512_loadu_si512(blocks + 64);
    } else {
      // Only the words up to the last scale (word 9 (count - 1)): the row may end right after
      // it. Masked-off words read as zero, so lanes past count are 0, as in AVX2.
      const int used = 9 * (count - 1) + 1;
      const uint64_t mask = (uint64_t{1} << used) - 1;
      lo = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(mask), blocks);
      hi = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(mask >> 32), blocks + 64);
    }
    const __m512i scales = _mm512_permutex2var_epi16(lo, words, hi);
    return _mm256_cvtph_ps(_mm512_extracti32x4_epi32(scales, 0));
  }
};

// Pass 2 with 512-bit vpdpbusd: a block's 16 nibble bytes of 4 rows fill one zmm (a row per
// 128-bit lane); a word permute brings bytes 4L..4L+3 of all 4 rows into lane L and an in-lane
// byte shuffle transposes them, so 32-bit lane c holds byte c of rows 0..3 side by side, which
// vpdpbusd multiplies by the 4 rows' t and sums: low nibbles give columns 0..15, high nibbles
// 16..31, in int32 lanes (no int16 stage, no widening).
struct SumsVnni512 {
  static void add_block(const uint8_t* const* rows, int steps, int64_t off, const int32_t* t4,
                        int64_t stride, int32_t base, float scale, float* yb) {
    alignas(64) static constexpr uint16_t kGather[32] = {
        0, 1, 8, 9, 16, 17, 24, 25, 2, 3, 10, 11, 18, 19, 26, 27,
        4, 5, 12, 13, 20, 21, 28, 29, 6, 7, 14, 15, 22, 23, 30, 31};
    const __m512i gather = _mm512_load_si512(kGather);
    const __m512i transpose = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    const auto load = [off](const uint8_t* row) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + off));
    };
    for (int k = 0; k < steps; ++k) {
      const uint8_t* const* r = rows + 4 * k;
      __m512i x = _mm512_castsi128_si512(load(r[0]));
      x = _mm512_inserti32x4(x, load(r[1]), 1);
      x = _mm512_inserti32x4(x, load(r[2]), 2);
      x = _mm512_inserti32x4(x, load(r[3]), 3);
      x = _mm512_shuffle_epi8(_mm512_permutexvar_epi16(gather, x), transpose);
      const __m512i t = _mm512_set1_epi32(t4[k * stride]);
      lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(x, m4), t);
      hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(x, 4), m4), t);
    }
    const __m512i bv = _mm512_set1_epi32(base);
    const __m512 sv = _mm512_set1_ps(scale);
    _mm512_storeu_ps(yb, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_add_epi32(lo, bv)),
                                         _mm512_loadu_ps(yb)));
    _mm512_storeu_ps(yb + 16, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_add_epi32(hi, bv)),
                                              _mm512_loadu_ps(yb + 16)));
  }
};

void axpy_q4_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
               const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) {
    return avx2::axpy_q4_0_int<ScalesPermute, SumsVnni512>(n, static_cast<const uint8_t*>(w), ldw,
                                                           idx, nr, a, y);
  }
  avx2::axpy_q4_0(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

void axpy_q4_0_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                     const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  avx2::axpy_q4_0_int_parts<ScalesPermute, SumsVnni512>(n, static_cast<const uint8_t*>(w), ldw,
                                                        idx, a, ends, n_parts, y, ldy);
}

}  // namespace

void set_axpy_kernels(Kernels& k) {
  k.q4_0.axpy = axpy_q4_0;
  k.q4_0.axpy_parts = axpy_q4_0_parts;
}

}  // namespace hearth::cpu::avx512
