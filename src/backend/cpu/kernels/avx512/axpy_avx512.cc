// The one-token Q4_0 and Q8_0 axpy of the AVX-512 table: the integer kernel of axpy_legacy_int.h
// with Q4_0's two passes and Q8_0's pass 2 in AVX-512. The integer sums and the final FMA are
// those of the AVX2 kernels, so the outputs are the same bits. Other token counts stay AVX2.
// - Pass 1 (Coefs16) quantizes 16 blocks per chunk, one per zmm lane, so its per-row and per-k
//   work is spread over twice the blocks of the ymm version. It needs the f16 scales of 16
//   consecutive blocks of each of a group's rows; they sit 18 bytes apart, so four 64-byte loads
//   and two vpermt2w pick words 0, 9, ..., 63 of bytes 0-127 and of bytes 144-271.
// - Pass 2 (SumsVnni512) sums with 512-bit vpdpbusd, without unpacking the nibbles (below).
// Together they beat 8-block chunks and nibbles split by shift and mask, with rows in L1, L3 or
// DRAM (figures in docs/benchmarks.md).
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/axpy_legacy_int.h"

namespace hearth::cpu::avx512 {
namespace {

using avx2::ChunkCoefs;
using avx2::IntGroup;

// The f16 scales of `count` <= 8 consecutive blocks (zero lanes past count) as floats.
__m256 scales_x8(const uint8_t* blocks, int count) {
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
  return _mm256_cvtph_ps(_mm512_castsi512_si128(scales));
}

// The f16 scales of `count` <= 16 consecutive blocks (zero lanes past count) as floats.
__m512 scales_x16(const uint8_t* blocks, int count) {
  constexpr int64_t kB = sizeof(BlockQ4_0);
  if (count < 16) {
    const __m256 lo = scales_x8(blocks, std::min(count, 8));
    const __m256 hi = count > 8 ? scales_x8(blocks + 8 * kB, count - 8) : _mm256_setzero_ps();
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  }
  // Words 0, 9, ..., 63 of bytes 0-127 into words 0-7, and of bytes 144-271 into words 8-15.
  alignas(64) static constexpr uint16_t kLow[32] = {0, 9, 18, 27, 36, 45, 54, 63};
  alignas(64) static constexpr uint16_t kHigh[32] = {0, 0, 0,  0,  0,  0,  0,  0,
                                                     0, 9, 18, 27, 36, 45, 54, 63};
  const __m512i first = _mm512_permutex2var_epi16(
      _mm512_loadu_si512(blocks), _mm512_load_si512(kLow), _mm512_loadu_si512(blocks + 64));
  const __m512i second =
      _mm512_permutex2var_epi16(_mm512_loadu_si512(blocks + 8 * kB), _mm512_load_si512(kHigh),
                                _mm512_loadu_si512(blocks + 8 * kB + 64));
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_mask_blend_epi16(0xff00, first, second)));
}

// Pass 1 of the AVX2 Coefs8 with 16 lanes: the packs and the in-lane transpose work per 128-bit
// lane, so lane L's 4 blocks land in dwords 4L..4L+3 as they do in each half of a ymm.
struct Coefs16 {
  static constexpr int64_t kChunk = 16;

  static void make(const IntGroup& g, int64_t off, int cb, ChunkCoefs<kChunk>& c) {
    constexpr int G = generic::kAxpyGroup;
    static_assert(G == 32, "the quantization below handles 32 coefficients");
    const __m512i transpose4 =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    alignas(64) float sbuf[G][kChunk];
    __m512 mv = _mm512_setzero_ps();
    for (int r = 0; r < G; ++r) {
      const __m512 sr = _mm512_mul_ps(scales_x16(g.rows[r] + off, cb), _mm512_set1_ps(g.coef[r]));
      _mm512_store_ps(sbuf[r], sr);
      mv = _mm512_max_ps(mv, _mm512_abs_ps(sr));
    }
    _mm512_store_ps(c.mvals, mv);
    _mm512_store_ps(c.scale, _mm512_div_ps(mv, _mm512_set1_ps(127.0f)));
    // A block with m < kAxpyMinScale may get inf here and garbage t, but pass 2 skips it.
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(127.0f), mv);
    __m512i tsum = _mm512_setzero_si512();
    for (int k = 0; k < G / 4; ++k) {
      __m512i t[4];
      for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(sbuf[4 * k + i]), inv));
        tsum = _mm512_add_epi32(tsum, t[i]);
      }
      const __m512i packed =
          _mm512_packs_epi16(_mm512_packs_epi32(t[0], t[1]), _mm512_packs_epi32(t[2], t[3]));
      _mm512_store_si512(c.tq4[k], _mm512_shuffle_epi8(packed, transpose4));
    }
    _mm512_store_si512(c.base, _mm512_mullo_epi32(tsum, _mm512_set1_epi32(-8)));
  }
};

// The 16 bytes at `off` of 4 rows, transposed so that 32-bit lane c holds byte c of rows 0..3
// side by side: a row per 128-bit lane, a word permute brings bytes 4L..4L+3 of all 4 rows into
// lane L, and an in-lane byte shuffle transposes them.
inline __m512i four_rows_by_column(const uint8_t* const* r, int64_t off) {
  alignas(64) static constexpr uint16_t kGather[32] = {0,  1,  8,  9,  16, 17, 24, 25, 2,  3,  10,
                                                       11, 18, 19, 26, 27, 4,  5,  12, 13, 20, 21,
                                                       28, 29, 6,  7,  14, 15, 22, 23, 30, 31};
  const __m512i transpose =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const auto load = [off](const uint8_t* row) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + off));
  };
  __m512i x = _mm512_castsi128_si512(load(r[0]));
  x = _mm512_inserti32x4(x, load(r[1]), 1);
  x = _mm512_inserti32x4(x, load(r[2]), 2);
  x = _mm512_inserti32x4(x, load(r[3]), 3);
  return _mm512_shuffle_epi8(_mm512_permutexvar_epi16(_mm512_load_si512(kGather), x), transpose);
}

// Pass 2 with 512-bit vpdpbusd: a block's 16 nibble bytes of 4 rows, transposed
// (four_rows_by_column), meet the 4 rows' t in vpdpbusd, summed in int32 lanes. The nibbles are
// not split: whole bytes (lo + 16 hi) and bytes masked to their high nibble (16 hi) go in as they
// are, and lo = sum(bytes) - sum(16 hi), hi = sum(16 hi) / 16 afterwards, exactly (per lane at
// most 8 steps * 4 rows * 255 * 127 < 2^31). Low nibbles give columns 0..15, high ones 16..31.
struct SumsVnni512 {
  static void add_block(const uint8_t* const* rows, int steps, int64_t off, const int32_t* t4,
                        int64_t stride, int32_t base, float scale, float* yb) {
    const __m512i high = _mm512_set1_epi8(static_cast<char>(0xf0));
    __m512i whole = _mm512_setzero_si512(), hi16 = _mm512_setzero_si512();
    for (int k = 0; k < steps; ++k) {
      const __m512i x = four_rows_by_column(rows + 4 * k, off);
      const __m512i t = _mm512_set1_epi32(t4[k * stride]);
      whole = _mm512_dpbusd_epi32(whole, x, t);
      hi16 = _mm512_dpbusd_epi32(hi16, _mm512_and_si512(x, high), t);
    }
    const __m512i lo = _mm512_sub_epi32(whole, hi16);
    const __m512i hi = _mm512_srai_epi32(hi16, 4);
    const __m512i bv = _mm512_set1_epi32(base);
    const __m512 sv = _mm512_set1_ps(scale);
    _mm512_storeu_ps(
        yb, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_add_epi32(lo, bv)), _mm512_loadu_ps(yb)));
    _mm512_storeu_ps(yb + 16, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_add_epi32(hi, bv)),
                                              _mm512_loadu_ps(yb + 16)));
  }
};

// Pass 2 of Q8_0 with 512-bit vpdpbusd: each half h of a block (16 code bytes of 4 rows) is
// transposed (four_rows_by_column), so 32-bit lane c holds column 16h + c of rows 0..3.
// vpdpbusd's first operand is unsigned, so the codes go in as q + 128 (xor 0x80) and
// 128 sum_r t_r comes off afterwards: pass 1's base is -8 sum_r t_r (Q4_0's), times 16. Per lane
// at most 8 steps * 4 rows * 255 * 127 < 2^31.
struct SumsQ8Vnni512 {
  static void add_block(const uint8_t* const* rows, int steps, int64_t off, const int32_t* t4,
                        int64_t stride, int32_t base, float scale, float* yb) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int k = 0; k < steps; ++k) {
      const __m512i t = _mm512_set1_epi32(t4[k * stride]);
      for (int h = 0; h < 2; ++h) {
        const __m512i x = four_rows_by_column(rows + 4 * k, off + 16 * h);
        acc[h] = _mm512_dpbusd_epi32(acc[h], _mm512_xor_si512(x, flip), t);
      }
    }
    const __m512i bv = _mm512_set1_epi32(16 * base);
    const __m512 sv = _mm512_set1_ps(scale);
    for (int h = 0; h < 2; ++h) {
      float* const y = yb + 16 * h;
      _mm512_storeu_ps(y, _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_add_epi32(acc[h], bv)),
                                          _mm512_loadu_ps(y)));
    }
  }
};

// Q8_0's scales sit 34 bytes apart: pass 1 takes them 8 blocks at a time through general
// registers, as AVX2 does.
using CoefsQ8 = avx2::Coefs8<avx2::ScalesGpr<BlockQ8_0>>;

// One token in integers (the passes above), other token counts as the AVX2 table (Fallback).
template <typename Block, typename Coefs, typename Sums, auto Fallback>
void axpy_legacy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                 const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) {
    return avx2::axpy_legacy_int<Block, Coefs, Sums>(n, static_cast<const uint8_t*>(w), ldw, idx,
                                                     nr, a, y);
  }
  Fallback(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

template <typename Block, typename Coefs, typename Sums>
void axpy_legacy_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                       const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  avx2::axpy_legacy_int_parts<Block, Coefs, Sums>(n, static_cast<const uint8_t*>(w), ldw, idx, a,
                                                  ends, n_parts, y, ldy);
}

}  // namespace

void set_axpy_kernels(Kernels& k) {
  k.q4_0.axpy = axpy_legacy<BlockQ4_0, Coefs16, SumsVnni512, avx2::axpy_q4_0>;
  k.q4_0.axpy_parts = axpy_legacy_parts<BlockQ4_0, Coefs16, SumsVnni512>;
  k.q8_0.axpy = axpy_legacy<BlockQ8_0, CoefsQ8, SumsQ8Vnni512, avx2::axpy_q8_0>;
  k.q8_0.axpy_parts = axpy_legacy_parts<BlockQ8_0, CoefsQ8, SumsQ8Vnni512>;
}

}  // namespace hearth::cpu::avx512
