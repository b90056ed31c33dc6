// axpy (the sparse down projection): y[t] += a[t, j] * W[idx[j]] for the active rows j. Decode
// reads each active row once and the output over and over, so rows go R at a time: one pass over y
// (loaded into registers, R FMAs, stored) per R rows keeps y's traffic in L1 and puts R weight
// streams in flight. Per output element the FMAs still run in ascending j, the reference's
// order, so results differ from it only by FMA rounding (and, for one token of Q8_0, by
// rounding a * d before the multiply by q) and do not depend on how the caller splits the columns.
// One token of Q4_0 goes through integer sums instead (axpy_q4_0_int), as the reference does.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/dtype.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/float_loads.h"

namespace hearth::cpu::avx2 {
namespace {

// Rows per pass: 4 weight streams, and for one token 4 broadcast coefficients, 4 accumulators
// and 4 decoded vectors of a quantized block in the 16 registers.
constexpr int kRows = 4;

// A decoder turns the kVecs * 8 columns from c of a row into float vectors, exactly as
// dequantize_row computes them. Float rows go a vector at a time (with a tail); quantized rows
// a block at a time (n is a multiple of the block).
template <typename L>
struct DecodeFloat {
  static constexpr int kVecs = 1;
  static constexpr int64_t kChunkBytes = 8 * L::kBytes;
  using Load = L;
  using Acc1 = void;  // float rows stream at DRAM speed with the generic pass
  static void run(const uint8_t* row, int64_t c, __m256* out) { out[0] = L::load8(row, c); }
};

struct AccQ8_0;
struct DecodeQ8_0 {
  static constexpr int kVecs = 4;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ8_0);
  using Acc1 = AccQ8_0;
  static void run(const uint8_t* row, int64_t c, __m256* out) {
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[c / kQK];
    const __m256 d = _mm256_set1_ps(half_to_float(b.d));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k));
      out[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
    }
  }
};

// Multi-token Q4_0 decode: 8 bytes widened to int32 lanes hold 8 low nibbles (weights k..k+7)
// and, shifted, the 8 high ones (weights 16+k..); d * (u - 8) is one FMA, u * d - 8 * d, exact
// like the reference's product, so the vectors match dequantize_row.
struct AccQ4_0;
struct DecodeQ4_0 {
  static constexpr int kVecs = 4;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_0);
  using Acc1 = AccQ4_0;
  static void run(const uint8_t* row, int64_t c, __m256* out) {
    const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[c / kQK];
    const float df = half_to_float(b.d);
    const __m256 d = _mm256_set1_ps(df), minus_8d = _mm256_set1_ps(-8.0f * df);
    const __m256i mask = _mm256_set1_epi32(0x0f);
    for (int k = 0; k < 2; ++k) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k));
      const __m256i u = _mm256_cvtepu8_epi32(bytes);
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(u, mask));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4));
      out[k] = _mm256_fmadd_ps(lo, d, minus_8d);
      out[k + 2] = _mm256_fmadd_ps(hi, d, minus_8d);
    }
  }
};

// Decode (one token) of quantized rows is compute-bound: per 32 weights it is all vector ops
// (widen, convert, FMA), and the block scale costs a scalar F16 conversion, a multiply and a
// broadcast on top. So the scale is folded into the coefficient, s = a * d, computed 8 blocks at
// a time with one vector conversion (scales_x8) and read back as memory broadcasts (load port,
// no ALU op); each weight vector then costs one int->float conversion and one FMA. The term is
// (a * d) * q instead of the reference's a * (d * q): one rounding in another place, the same
// order of the sum over j.
// Q::accumulate(qs, s, s_lo, acc) adds one block of one row into 4 accumulator vectors.
struct AccQ8_0 {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr float kLoScale = 1.0f;  // unused: one scale for all 32 weights
  static void accumulate(const uint8_t* qs, __m256 s, __m256, __m256* acc) {
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * k));
      acc[k] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), acc[k]);
    }
  }
};

// Q4_0 without a per-element "- 8": the bytes are sign-extended (b = L + 16 H as int8), and
// flipping bit 3 and bits 7.. (xor 0xffffff88) turns that into 16 (H - 8) + (L ^ 8), i.e. the
// high nibble already minus 8 above bit 4 and the low nibble's (L - 8) as a 4-bit two's
// complement. An arithmetic shift right by 4 gives H - 8; a shift left by 28 gives
// (L - 8) * 2^28, exactly convertible, whose 2^-28 goes into the low half's scale. Per 8
// weights: one shift, one conversion, one FMA (plus a widen and an xor per 8 bytes).
// s * 2^-28 is subnormal only for |a * d| < 2^-98, where the lost bits are below 2^-119.
struct AccQ4_0 {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr float kLoScale = 0x1p-28f;
  static void accumulate(const uint8_t* qs, __m256 s, __m256 s_lo, __m256* acc) {
    const __m256i flip = _mm256_set1_epi32(static_cast<int>(0xffffff88u));
    for (int k = 0; k < 2; ++k) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * k));
      const __m256i x = _mm256_xor_si256(_mm256_cvtepi8_epi32(bytes), flip);
      acc[k] = _mm256_fmadd_ps(s_lo, _mm256_cvtepi32_ps(_mm256_slli_epi32(x, 28)), acc[k]);
      acc[k + 2] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm256_srai_epi32(x, 4)), acc[k + 2]);
    }
  }
};

// The f16 scales of blocks [0, count) (count <= 8) of a row, as floats, with one conversion: the
// halves are packed in general registers (the integer pipes are idle here), then moved over.
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

// One pass of R quantized rows for one token (coefficients coef[r]). Two blocks per step: the
// R FMAs per accumulator are a dependent chain, so 8 accumulators (not 4) keep enough
// independent chains in the scheduler to fill the FMA ports. `next` as in axpy_pass.
template <typename Q, int R>
void axpy_pass_q1(int64_t n, const uint8_t* const* w, const uint8_t* const* next,
                  const float* coef, float* y) {
  constexpr int64_t kB = Q::kBlockBytes;
  const int64_t nb = n / kQK;
  alignas(32) float sc[R][2][8];  // per row: s, s * kLoScale of 8 blocks
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, nb - b0));
    for (int r = 0; r < R; ++r) {
      const __m256 s = _mm256_mul_ps(scales_x8(w[r] + b0 * kB, kB, count), _mm256_set1_ps(coef[r]));
      _mm256_store_ps(sc[r][0], s);
      _mm256_store_ps(sc[r][1], _mm256_mul_ps(s, _mm256_set1_ps(Q::kLoScale)));
    }
    const auto step = [&](int b, auto blocks) {
      constexpr int kBlocks = decltype(blocks)::value;
      const int64_t blk = b0 + b;
      float* yb = y + blk * kQK;
      // Prefetch once per step: 2 blocks (36 or 68 bytes) per step, so every line is touched.
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(next[r] + blk * kB), _MM_HINT_T0);
      __m256 acc[4 * kBlocks];
      for (int v = 0; v < 4 * kBlocks; ++v) acc[v] = _mm256_loadu_ps(yb + 8 * v);
      for (int r = 0; r < R; ++r) {
        for (int k = 0; k < kBlocks; ++k) {
          Q::accumulate(w[r] + (blk + k) * kB + 2, _mm256_broadcast_ss(&sc[r][0][b + k]),
                        _mm256_broadcast_ss(&sc[r][1][b + k]), acc + 4 * k);
        }
      }
      for (int v = 0; v < 4 * kBlocks; ++v) _mm256_storeu_ps(yb + 8 * v, acc[v]);
    };
    int b = 0;
    for (; b + 2 <= count; b += 2) step(b, std::integral_constant<int, 2>{});
    if (b < count) step(b, std::integral_constant<int, 1>{});
  }
}

// Adds R rows (coefficients a[t * lda + j[r]]) to nt output rows. `next` are the rows of the
// following pass: the same offsets of them are prefetched as this pass goes, so their DRAM
// latency overlaps this pass's work (rows are scattered and short, too short for the hardware
// prefetchers to catch on).
template <typename D, int R>
void axpy_pass(int64_t n, const uint8_t* const* w, const uint8_t* const* next, const int64_t* j,
               const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if constexpr (!std::is_void_v<typename D::Acc1>) {
    if (nt == 1) {
      float coef[R];
      for (int r = 0; r < R; ++r) coef[r] = a[j[r]];
      return axpy_pass_q1<typename D::Acc1, R>(n, w, next, coef, y);
    }
  }
  constexpr int V = D::kVecs;
  constexpr int64_t kCols = 8 * V;
  // Prefetch once per cache line of weights: every kLineChunks chunks.
  constexpr int64_t kLineChunks = D::kChunkBytes >= 64 ? 1 : 64 / D::kChunkBytes;
  const auto prefetch_next = [&](int64_t c) {
    if ((c / kCols) % kLineChunks != 0) return;
    const int64_t offset = c / kCols * D::kChunkBytes;
    for (int r = 0; r < R; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(next[r] + offset), _MM_HINT_T0);
  };
  int64_t c = 0;
  if (nt == 1) {
    // Decode: coefficients stay in registers and each row's vectors meet y right away.
    __m256 coef[R];
    for (int r = 0; r < R; ++r) coef[r] = _mm256_set1_ps(a[j[r]]);
    for (; c + kCols <= n; c += kCols) {
      prefetch_next(c);
      __m256 acc[V];
      for (int v = 0; v < V; ++v) acc[v] = _mm256_loadu_ps(y + c + 8 * v);
      for (int r = 0; r < R; ++r) {
        __m256 wv[V];
        D::run(w[r], c, wv);
        for (int v = 0; v < V; ++v) acc[v] = _mm256_fmadd_ps(coef[r], wv[v], acc[v]);
      }
      for (int v = 0; v < V; ++v) _mm256_storeu_ps(y + c + 8 * v, acc[v]);
    }
  } else {
    // Several tokens: each weight vector is decoded once and meets every token.
    for (; c + kCols <= n; c += kCols) {
      prefetch_next(c);
      __m256 wv[R][V];
      for (int r = 0; r < R; ++r) D::run(w[r], c, wv[r]);
      for (int64_t t = 0; t < nt; ++t) {
        float* yt = y + t * ldy + c;
        for (int v = 0; v < V; ++v) {
          __m256 acc = _mm256_loadu_ps(yt + 8 * v);
          for (int r = 0; r < R; ++r) {
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + t * lda + j[r]), wv[r][v], acc);
          }
          _mm256_storeu_ps(yt + 8 * v, acc);
        }
      }
    }
  }
  if constexpr (V == 1) {
    if (c < n) {
      // The last n - c < 8 columns of float rows: zero-padded weights, masked y.
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - c)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = load_tail<typename D::Load>(w[r], c, n - c);
      for (int64_t t = 0; t < nt; ++t) {
        float* yt = y + t * ldy + c;
        __m256 acc = _mm256_maskload_ps(yt, mask);
        for (int r = 0; r < R; ++r) {
          acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + t * lda + j[r]), wv[r], acc);
        }
        _mm256_maskstore_ps(yt, mask, acc);
      }
    }
  }
}

// One-token Q4_0 in 8-bit integers, as generic/axpy.cc defines it (groups of kAxpyGroup active
// rows; per group and block, int8 coefficients t_j with one float scale): the float axpy spends
// ~16 vector ops per row and block (widen, convert, FMA), this one ~5. Per group, columns go in
// chunks of 8 blocks. Pass 1 quantizes the chunk's coefficients with the 8 blocks as the 8
// lanes (no horizontal max or sum). Pass 2 adds the rows 4 at a time: rows (0, 2) and (1, 3)
// side by side in two vectors, their bytes interleaved (unpack), so that each 16-bit lane holds
// two rows' nibbles of one column, which maddubs multiplies by the two rows' t. int16 sums
// cannot overflow: per lane 16 rows, |t| <= 127, nibbles <= 15, 16 * 15 * 127 < 32768. The
// "- 8" is -8 * sum_j t_j, added to the int32 sums. Every sum is exact, so the result differs
// from the scalar reference only by the final FMA. Pass 2 also prefetches the next group's
// rows, whose addresses are known a group ahead.
struct Q4Group {
  const uint8_t* rows[generic::kAxpyGroup];
  alignas(32) float coef[generic::kAxpyGroup];
  int count = 0;
};

// The next group of active rows from j on; the rows past count repeat a valid row, with
// coefficient 0.
inline void next_q4_group(const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr,
                          const float* a, int64_t& j, Q4Group& g) {
  g.count = 0;
  for (; j < nr && g.count < generic::kAxpyGroup; ++j) {
    if (a[j] == 0.0f) continue;
    g.rows[g.count] = wb + static_cast<size_t>(idx[j]) * ldw;
    g.coef[g.count++] = a[j];
  }
  for (int r = g.count; r < generic::kAxpyGroup; ++r) {
    g.rows[r] = g.count > 0 ? g.rows[g.count - 1] : wb;
    g.coef[r] = 0.0f;
  }
}

// The f16 block scales at byte `off` of 8 rows, as floats: packed in general registers (the
// integer pipes are idle here), then one conversion.
inline __m256 scales_rows8(const uint8_t* const* rows, int64_t off) {
  uint64_t h[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    uint16_t d;
    std::memcpy(&d, rows[i] + off, 2);
    h[i >> 2] |= uint64_t{d} << (16 * (i & 3));
  }
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<long long>(h[1]), static_cast<long long>(h[0])));
}

constexpr int64_t kChunkBlocks = 8;  // one per lane in pass 1

void axpy_q4_0_int(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr,
                   const float* a, float* y) {
  constexpr int G = generic::kAxpyGroup;
  constexpr int64_t kB = sizeof(BlockQ4_0);
  static_assert(G == 32, "the quantization below handles 32 coefficients");
  const int64_t nb = n / kQK;
  const int64_t row_len = nb * kB;
  Q4Group groups[2];
  int64_t j = 0;
  next_q4_group(wb, ldw, idx, nr, a, j, groups[0]);
  // The first group's lines are requested up front; later groups' lines while the group before
  // them is computed.
  for (int r = 0; r < groups[0].count; ++r) {
    for (int64_t o = 0; o < row_len; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(groups[0].rows[r] + o), _MM_HINT_T0);
  }
  alignas(32) float sbuf[G][kChunkBlocks];
  alignas(32) int32_t tq4[G / 4][kChunkBlocks];
  alignas(32) float scale[kChunkBlocks], mvals[kChunkBlocks];
  alignas(32) int32_t base[kChunkBlocks];
  // Within each lane, bytes (4i + r) -> (4r + i): the 4 rows' t of block i side by side.
  const __m256i transpose4 = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11,
                                              15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7,
                                              11, 15);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  // Bytes (0, 1) of a broadcast dword in the low lane, (2, 3) in the high one.
  const __m256i pair = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2,
                                        3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  for (int cur = 0; groups[cur].count > 0; cur ^= 1) {
    const Q4Group& g = groups[cur];
    Q4Group& ng = groups[cur ^ 1];
    next_q4_group(wb, ldw, idx, nr, a, j, ng);
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int cb = static_cast<int>(std::min(kChunkBlocks, nb - b0));
      // Pass 1: per block of the chunk (8 blocks as the 8 lanes, no horizontal operations) the
      // scale, the int8 coefficients and -8 * sum(t). tq4[k][b] holds t of rows 4k..4k+3.
      {
        __m256 mv = _mm256_setzero_ps();
        const __m256 sign = _mm256_set1_ps(-0.0f);
        for (int r = 0; r < G; ++r) {
          const __m256 sr = _mm256_mul_ps(scales_x8(g.rows[r] + b0 * kB, kB, cb),
                                          _mm256_broadcast_ss(g.coef + r));
          _mm256_store_ps(sbuf[r], sr);
          mv = _mm256_max_ps(mv, _mm256_andnot_ps(sign, sr));
        }
        _mm256_store_ps(mvals, mv);
        _mm256_store_ps(scale, _mm256_div_ps(mv, _mm256_set1_ps(127.0f)));
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
          _mm256_store_si256(reinterpret_cast<__m256i*>(tq4[k]),
                             _mm256_shuffle_epi8(packed, transpose4));
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(base),
                           _mm256_mullo_epi32(tsum, _mm256_set1_epi32(-8)));
      }
      // Pass 2: the integer sums, added to y.
      for (int b = 0; b < cb; ++b) {
        const int64_t blk = b0 + b;
        // Next group: every line of its rows' bytes in this block (block ends 36 bytes apart
        // touch every line; the first block also its start).
        if (blk == 0 || (blk & 1) || blk == nb - 1) {
          const int64_t off = blk == 0 ? 0 : blk * kB + kB - 1;
          for (int r = 0; r < ng.count; ++r)
            _mm_prefetch(reinterpret_cast<const char*>(ng.rows[r] + off), _MM_HINT_T0);
        }
        if (mvals[b] < generic::kAxpyMinScale) continue;
        __m256i acc[4];
        for (int v = 0; v < 4; ++v) acc[v] = _mm256_setzero_si256();
        const int64_t off = blk * kB + 2;
        const int steps = (g.count + 3) / 4;
        for (int k = 0; k < steps; ++k) {
          const uint8_t* const* r = g.rows + 4 * k;
          const __m256i x = _mm256_inserti128_si256(
              _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + off))),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + off)), 1);
          const __m256i z = _mm256_inserti128_si256(
              _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + off))),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + off)), 1);
          const __m256i lo = _mm256_unpacklo_epi8(x, z);  // bytes 0..7: columns 0..7, 16..23
          const __m256i hi = _mm256_unpackhi_epi8(x, z);  // bytes 8..15: columns 8..15, 24..31
          const __m256i tv = _mm256_shuffle_epi8(_mm256_set1_epi32(tq4[k][b]), pair);
          acc[0] = _mm256_add_epi16(acc[0], _mm256_maddubs_epi16(_mm256_and_si256(lo, m4), tv));
          acc[1] = _mm256_add_epi16(acc[1], _mm256_maddubs_epi16(_mm256_and_si256(hi, m4), tv));
          acc[2] = _mm256_add_epi16(
              acc[2], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), tv));
          acc[3] = _mm256_add_epi16(
              acc[3], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 4), m4), tv));
        }
        const __m256i bv = _mm256_set1_epi32(base[b]);
        const __m256 sv = _mm256_set1_ps(scale[b]);
        float* yb = y + blk * kQK;
        for (int v = 0; v < 4; ++v) {
          const __m256i sum = _mm256_add_epi32(
              _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc[v])),
                               _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc[v], 1))),
              bv);
          const __m256 yv = _mm256_loadu_ps(yb + 8 * v);
          _mm256_storeu_ps(yb + 8 * v, _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(sum), yv));
        }
      }
    }
  }
}

// Active rows are collected into a window of up to kWindow, topped up whenever fewer than two
// passes' worth remain, so every pass knows the rows of the next.
constexpr int kWindow = 64;

template <typename D>
void axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
          size_t lda, int64_t nt, float* y, size_t ldy) {
  static_assert(kRows == 4, "the switch below covers 1 to 4 rows");
  if constexpr (std::is_same_v<D, DecodeQ4_0>) {
    if (nt == 1) return axpy_q4_0_int(n, static_cast<const uint8_t*>(w), ldw, idx, nr, a, y);
  }
  const auto* wb = static_cast<const uint8_t*>(w);
  // Active rows [p, m) of the window. kRows spare entries repeat the last row, so a pass before
  // a short final one still reads kRows valid `next` pointers.
  const uint8_t* rows[kWindow + kRows];
  int64_t js[kWindow];
  int p = 0, m = 0;
  int64_t j = 0;
  const auto top_up = [&] {
    std::copy(rows + p, rows + m, rows);
    std::copy(js + p, js + m, js);
    m -= p;
    p = 0;
    for (; j < nr && m < kWindow; ++j) {
      if (!generic::axpy_row_active(a, lda, nt, j)) continue;
      rows[m] = wb + static_cast<size_t>(idx[j]) * ldw;
      js[m++] = j;
    }
    for (int r = m; r < m + kRows && m > 0; ++r) rows[r] = rows[m - 1];
  };
  top_up();
  while (p < m) {
    if (m - p < 2 * kRows && j < nr) top_up();
    const uint8_t* const* cur = rows + p;
    const uint8_t* const* next = p + kRows < m ? cur + kRows : cur;
    const int count = std::min(kRows, m - p);
    switch (count) {
      case 4:
        axpy_pass<D, 4>(n, cur, next, js + p, a, lda, nt, y, ldy);
        break;
      case 3:
        axpy_pass<D, 3>(n, cur, next, js + p, a, lda, nt, y, ldy);
        break;
      case 2:
        axpy_pass<D, 2>(n, cur, next, js + p, a, lda, nt, y, ldy);
        break;
      default:
        axpy_pass<D, 1>(n, cur, next, js + p, a, lda, nt, y, ldy);
        break;
    }
    p += count;
  }
}

}  // namespace

void set_axpy_kernels(Kernels& k) {
  k.f32.axpy = axpy<DecodeFloat<LoadF32>>;
  k.f16.axpy = axpy<DecodeFloat<LoadF16>>;
  k.bf16.axpy = axpy<DecodeFloat<LoadBf16>>;
  k.q8_0.axpy = axpy<DecodeQ8_0>;
  k.q4_0.axpy = axpy<DecodeQ4_0>;
}

}  // namespace hearth::cpu::avx2
