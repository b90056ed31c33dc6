// The one-token Q4_0 axpy of the AVX-512 table: the integer kernel of axpy_q4_0_int.h with the
// block scales read by a word permute. Its pass 1 needs the f16 scales of 8 consecutive blocks
// of each of a group's rows; they sit 18 bytes apart, which AVX2 gathers through general
// registers (8 loads, shifts and ors per row and chunk, ~40% of the kernel's time). Here two
// 64-byte loads cover the chunk (8 blocks are 144 bytes, the 8th scale ends at byte 128) and
// one vpermt2w picks words 0, 9, ..., 63. The integer sums and the final FMA are those of the
// AVX2 kernel, so the outputs are the same bits. Other token counts stay AVX2.
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

void axpy_q4_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
               const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) {
    return avx2::axpy_q4_0_int<ScalesPermute>(n, static_cast<const uint8_t*>(w), ldw, idx, nr, a,
                                              y);
  }
  avx2::axpy_q4_0(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

}  // namespace

void set_axpy_kernels(Kernels& k) { k.q4_0.axpy = axpy_q4_0; }

}  // namespace hearth::cpu::avx512
