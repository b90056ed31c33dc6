// The one-token Q4_0 and Q8_0 axpy in 8-bit integers (generic_kernels.h, kAxpyGroup), shared by
// the AVX2 and AVX-512 tables, which plug in their own pass 1 (coefficients) and pass 2 (sums).
// Every sum is exact and the final FMA is the same, so all of them give the same bits. Include
// only from files compiled with AVX2/FMA/F16C (the avx2/ and avx512/ folders).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/dtype.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// One token in 8-bit integers, as generic/axpy.cc defines it (groups of kAxpyGroup active rows;
// per group and block, int8 coefficients t_j with one float scale): the float axpy spends ~16
// vector ops per row and block of Q4_0 (widen, convert, FMA), this one ~5. Per group, columns go in
// chunks of blocks, one block per vector lane. Pass 1 (Coefs8 below; AVX-512 has a 16-lane one)
// quantizes the chunk's coefficients. Pass 2 adds each block's integer sums over the group's
// rows into y (Sums::add_block, below for AVX2). The "- 8" is -8 * sum_j t_j, added to the int32
// sums. Every sum is exact, so the result differs from the scalar reference only by the final
// FMA, and every pass 1 and pass 2 gives the same bits. Pass 2 also prefetches the next group's
// rows, whose addresses are known a group ahead. The list may come in consecutive parts, each
// summed into its own output (the chunked partial sums of sparse_axpy): a group never spans two
// parts, so every part gets the bits a call of its own would give, while the read-ahead runs on
// across the parts' boundaries instead of starting cold at each one.
struct IntGroup {
  const uint8_t* rows[generic::kAxpyGroup];
  alignas(32) float coef[generic::kAxpyGroup];
  int count = 0;
  int64_t part = 0;
};

// Where the next group starts: position j of the list, in part `part` (positions up to
// ends[part]).
struct IntCursor {
  int64_t j = 0;
  int64_t part = 0;
};

// The next group of active rows from the cursor on, within one part; empty only once every part
// is used up. The rows past count repeat a valid row, with coefficient 0.
inline void next_int_group(const uint8_t* wb, size_t ldw, const int32_t* idx, const float* a,
                          const int64_t* ends, int64_t n_parts, IntCursor& at, IntGroup& g) {
  g.count = 0;
  for (; at.part < n_parts; ++at.part) {
    for (; at.j < ends[at.part] && g.count < generic::kAxpyGroup; ++at.j) {
      if (a[at.j] == 0.0f) continue;
      g.rows[g.count] = wb + static_cast<size_t>(idx[at.j]) * ldw;
      g.coef[g.count++] = a[at.j];
    }
    if (g.count > 0) break;
  }
  g.part = at.part;
  for (int r = g.count; r < generic::kAxpyGroup; ++r) {
    g.rows[r] = g.count > 0 ? g.rows[g.count - 1] : wb;
    g.coef[r] = 0.0f;
  }
}

// Pass 2 for one block: y[c] += scale * (sum_r t_r q_r[c] + base) for its 32 columns, over
// `steps` x 4 rows (rows[r] + off: the block's nibbles; t of rows 4k..4k+3 in t4[k * stride]).
// Rows (0, 2) and (1, 3) go side by side in two vectors, their bytes interleaved (unpack), so
// each 16-bit lane holds two rows' nibbles of one column, which maddubs multiplies by the two
// rows' t. int16 sums cannot overflow: per lane 16 rows, |t| <= 127, nibbles <= 15,
// 16 * 15 * 127 < 32768.
struct SumsAvx2 {
  static void add_block(const uint8_t* const* rows, int steps, int64_t off, const int32_t* t4,
                        int64_t stride, int32_t base, float scale, float* yb) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    // Bytes (0, 1) of a broadcast dword in the low lane, (2, 3) in the high one.
    const __m256i pair = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                          3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    __m256i acc[4];
    for (int v = 0; v < 4; ++v) acc[v] = _mm256_setzero_si256();
    for (int k = 0; k < steps; ++k) {
      const uint8_t* const* r = rows + 4 * k;
      const __m256i x = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + off))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + off)), 1);
      const __m256i z = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + off))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + off)), 1);
      const __m256i lo = _mm256_unpacklo_epi8(x, z);  // bytes 0..7: columns 0..7, 16..23
      const __m256i hi = _mm256_unpackhi_epi8(x, z);  // bytes 8..15: columns 8..15, 24..31
      const __m256i tv = _mm256_shuffle_epi8(_mm256_set1_epi32(t4[k * stride]), pair);
      acc[0] = _mm256_add_epi16(acc[0], _mm256_maddubs_epi16(_mm256_and_si256(lo, m4), tv));
      acc[1] = _mm256_add_epi16(acc[1], _mm256_maddubs_epi16(_mm256_and_si256(hi, m4), tv));
      acc[2] = _mm256_add_epi16(
          acc[2], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), tv));
      acc[3] = _mm256_add_epi16(
          acc[3], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 4), m4), tv));
    }
    const __m256i bv = _mm256_set1_epi32(base);
    const __m256 sv = _mm256_set1_ps(scale);
    for (int v = 0; v < 4; ++v) {
      const __m256i sum = _mm256_add_epi32(
          _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc[v])),
                           _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc[v], 1))),
          bv);
      const __m256 yv = _mm256_loadu_ps(yb + 8 * v);
      _mm256_storeu_ps(yb + 8 * v, _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(sum), yv));
    }
  }
};

// The f16 scales of blocks [0, count) (count <= 8) of a row, blocks `stride` bytes apart, as
// floats, with one conversion: the halves are packed in general registers (the integer pipes are
// idle here), then moved over.
inline __m256 scales_x8(const uint8_t* blocks, int64_t stride, int count) {
  uint64_t h[2] = {0, 0};
  const auto put = [&](int i) {
    uint16_t d;
    std::memcpy(&d, blocks + i * stride, 2);
    h[i >> 2] |= uint64_t{d} << (16 * (i & 3));
  };
  if (count == 8) {
    for (int i = 0; i < 8; ++i) put(i);  // unrolled
  } else {
    for (int i = 0; i < count; ++i) put(i);
  }
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<long long>(h[1]), static_cast<long long>(h[0])));
}

// Coefs8's scales of a legacy block type (its f16 d first), gathered in general registers.
template <typename Block>
struct ScalesGpr {
  static __m256 chunk(const uint8_t* blocks, int count) {
    return scales_x8(blocks, sizeof(Block), count);
  }
};

// Pass 2 of Q8_0 for one block: y[c] += scale * sum_r t_r q_r[c] for its 32 columns, over
// `steps` x 4 rows. The signed bytes are widened to 16 bits and two rows' words interleaved, so
// madd multiplies a column's pair by the two rows' t and adds them into an int32 lane (no
// saturation: |t| <= 127, |q| <= 128). The codes are signed, so `base` (pass 1's -8 sum_r t_r,
// for Q4_0's offset nibbles) is not used.
struct SumsQ8Avx2 {
  static void add_block(const uint8_t* const* rows, int steps, int64_t off, const int32_t* t4,
                        int64_t stride, int32_t /*base*/, float scale, float* yb) {
    // acc[h][0]: columns 16h + {0..3, 8..11}; acc[h][1]: 16h + {4..7, 12..15}.
    __m256i acc[2][2] = {};
    const auto widen = [off](const uint8_t* row, int h) {
      return _mm256_cvtepi8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + off + 16 * h)));
    };
    for (int k = 0; k < steps; ++k) {
      const uint8_t* const* r = rows + 4 * k;
      // The 4 rows' t as 16-bit words, then (t0, t1) and (t2, t3) in every 32-bit lane.
      const __m256i t16 = _mm256_cvtepi8_epi16(_mm_set1_epi32(t4[k * stride]));
      const __m256i tv[2] = {_mm256_shuffle_epi32(t16, 0x00), _mm256_shuffle_epi32(t16, 0x55)};
      for (int p = 0; p < 2; ++p) {
        for (int h = 0; h < 2; ++h) {
          const __m256i a = widen(r[2 * p], h), b = widen(r[2 * p + 1], h);
          const __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), tv[p]);
          const __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), tv[p]);
          acc[h][0] = _mm256_add_epi32(acc[h][0], lo);
          acc[h][1] = _mm256_add_epi32(acc[h][1], hi);
        }
      }
    }
    const __m256 sv = _mm256_set1_ps(scale);
    for (int h = 0; h < 2; ++h) {
      const __m256i first = _mm256_permute2x128_si256(acc[h][0], acc[h][1], 0x20);
      const __m256i second = _mm256_permute2x128_si256(acc[h][0], acc[h][1], 0x31);
      float* const y = yb + 16 * h;
      _mm256_storeu_ps(y, _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(first), _mm256_loadu_ps(y)));
      _mm256_storeu_ps(y + 8,
                       _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(second), _mm256_loadu_ps(y + 8)));
    }
  }
};

// Pass 1's output for one chunk of kChunk blocks of a group, block b in lane b: tq4[k][b] holds
// the int8 coefficients t of rows 4k..4k+3, side by side; base[b] = -8 * sum_r t_r; pass 2
// multiplies its integer sums by scale[b] and skips blocks with mvals[b] < kAxpyMinScale.
template <int64_t kChunk>
struct ChunkCoefs {
  alignas(64) int32_t tq4[generic::kAxpyGroup / 4][kChunk];
  alignas(64) float scale[kChunk];
  alignas(64) float mvals[kChunk];
  alignas(64) int32_t base[kChunk];
};

// Pass 1 with the chunk's 8 blocks as the 8 lanes of a ymm register (no horizontal max or sum).
// Scales::chunk(blocks, count) reads the f16 scales of `count` <= 8 consecutive blocks (zero
// lanes past count) as floats, which each ISA does its own way.
template <typename Scales>
struct Coefs8 {
  static constexpr int64_t kChunk = 8;

  // off: the chunk's first byte within the group's rows; cb <= 8 blocks.
  static void make(const IntGroup& g, int64_t off, int cb, ChunkCoefs<kChunk>& c) {
    constexpr int G = generic::kAxpyGroup;
    static_assert(G == 32, "the quantization below handles 32 coefficients");
    // Within each lane, bytes (4i + r) -> (4r + i): the 4 rows' t of block i side by side.
    const __m256i transpose4 = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11,
                                                15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7,
                                                11, 15);
    alignas(32) float sbuf[G][kChunk];
    __m256 mv = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int r = 0; r < G; ++r) {
      const __m256 sr = _mm256_mul_ps(Scales::chunk(g.rows[r] + off, cb),
                                      _mm256_broadcast_ss(g.coef + r));
      _mm256_store_ps(sbuf[r], sr);
      mv = _mm256_max_ps(mv, _mm256_andnot_ps(sign, sr));
    }
    _mm256_store_ps(c.mvals, mv);
    _mm256_store_ps(c.scale, _mm256_div_ps(mv, _mm256_set1_ps(127.0f)));
    // A block with m < kAxpyMinScale may get inf here and garbage t, but pass 2 skips it.
    const __m256 inv = _mm256_div_ps(_mm256_set1_ps(127.0f), mv);
    __m256i tsum = _mm256_setzero_si256();
    for (int k = 0; k < G / 4; ++k) {
      __m256i t[4];
      for (int i = 0; i < 4; ++i) {
        t[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(sbuf[4 * k + i]), inv));
        tsum = _mm256_add_epi32(tsum, t[i]);
      }
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(t[0], t[1]),
                                                _mm256_packs_epi32(t[2], t[3]));
      _mm256_store_si256(reinterpret_cast<__m256i*>(c.tq4[k]),
                         _mm256_shuffle_epi8(packed, transpose4));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(c.base),
                       _mm256_mullo_epi32(tsum, _mm256_set1_epi32(-8)));
  }
};

// Rows [r0, r1)'s bytes [off, off + bytes), each line they touch once, with the prefetch hint
// Hint (_MM_HINT_T0: into L1, _MM_HINT_T1: into L2).
template <_mm_hint Hint>
void prefetch_rows(const uint8_t* const* rows, int r0, int r1, int64_t off, int64_t bytes) {
  for (int r = r0; r < r1; ++r) {
    const auto begin = reinterpret_cast<uintptr_t>(rows[r] + off);
    for (uintptr_t line = begin & ~uintptr_t{63}; line < begin + bytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(line), Hint);
  }
}

// Parts: positions [ends[p - 1], ends[p]) of idx and a (ends[-1] = 0) add into y + p * ldy.
// Block: BlockQ4_0 or BlockQ8_0 (the f16 scale, then the codes); Coefs: pass 1 (Coefs8 or a wider
// one), Sums: pass 2 for that block type.
template <typename Block, typename Coefs, typename Sums>
void axpy_legacy_int_parts(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx,
                           const float* a, const int64_t* ends, int64_t n_parts, float* y,
                           size_t ldy) {
  constexpr int64_t kChunk = Coefs::kChunk;
  constexpr int64_t kB = sizeof(Block);
  const int64_t nb = n / kQK;
  const int64_t row_len = nb * kB;
  IntGroup groups[2];
  IntCursor at;
  next_int_group(wb, ldw, idx, a, ends, n_parts, at, groups[0]);
  // The first group's lines are requested up front; later groups' lines while the group before
  // them is computed.
  prefetch_rows<_MM_HINT_T0>(groups[0].rows, 0, groups[0].count, 0, row_len);
  ChunkCoefs<kChunk> c;
  for (int cur = 0; groups[cur].count > 0; cur ^= 1) {
    const IntGroup& g = groups[cur];
    IntGroup& ng = groups[cur ^ 1];
    next_int_group(wb, ldw, idx, a, ends, n_parts, at, ng);
    float* const yg = y + static_cast<size_t>(g.part) * ldy;
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
      const int cb = static_cast<int>(std::min(kChunk, nb - b0));
      // This group's next chunk into L1 while this one computes (its lines are in L2 from the
      // prefetch below one group earlier): pass 1 starts by reading every row's scales.
      if (b0 + kChunk < nb) {
        const int64_t next = b0 + kChunk;
        prefetch_rows<_MM_HINT_T0>(g.rows, 0, g.count, next * kB,
                                   (std::min(nb, next + kChunk) - next) * kB);
      }
      Coefs::make(g, b0 * kB, cb, c);
      // Pass 2: the integer sums, added to y.
      for (int b = 0; b < cb; ++b) {
        const int64_t blk = b0 + b;
        // Next group: every line of its rows' bytes in this block (Q4_0's block ends 36 bytes
        // apart, and every Q8_0 block's end, touch every line; the first block also its start).
        // Into L2, not L1: a group of 32 rows of 2048 Q4_0 columns is 36 KiB, so two do not fit
        // a 48 KiB L1 and fetching the next one there would evict this one's lines.
        if (blk == 0 || kB > 32 || (blk & 1) || blk == nb - 1) {
          const int64_t off = blk == 0 ? 0 : blk * kB + kB - 1;
          for (int r = 0; r < ng.count; ++r)
            _mm_prefetch(reinterpret_cast<const char*>(ng.rows[r] + off), _MM_HINT_T1);
        }
        if (c.mvals[b] < generic::kAxpyMinScale) continue;
        Sums::add_block(g.rows, (g.count + 3) / 4, blk * kB + 2, &c.tq4[0][b], kChunk, c.base[b],
                        c.scale[b], yg + blk * kQK);
      }
    }
  }
}

template <typename Block, typename Coefs, typename Sums>
void axpy_legacy_int(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, float* y) {
  axpy_legacy_int_parts<Block, Coefs, Sums>(n, wb, ldw, idx, a, &nr, 1, y, 0);
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
