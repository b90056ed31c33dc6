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
#include "core/quant_blocks.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/axpy_kquant_decode.h"
#include "backend/cpu/kernels/avx2/axpy_kquant_int.h"
#include "backend/cpu/kernels/avx2/axpy_q4_0_int.h"
#include "backend/cpu/kernels/avx2/axpy_window.h"
#include "backend/cpu/kernels/avx2/float_loads.h"

namespace hearth::cpu::avx2 {
namespace {

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
void axpy_pass_q1(int64_t n, const uint8_t* const* w, const uint8_t* const* next, const float* coef,
                  float* y) {
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
    alignas(32) float factors[R][16];  // K-quants: the current super-block's, coefficient folded in
    for (; c + kCols <= n; c += kCols) {
      prefetch_next(c);
      __m256 acc[V];
      for (int v = 0; v < V; ++v) acc[v] = _mm256_loadu_ps(y + c + 8 * v);
      if constexpr (requires { &D::add_factored; }) {
        if (c % kQK_K == 0) {
          for (int r = 0; r < R; ++r) D::set_factors(w[r], c, a[j[r]], factors[r]);
        }
        float mins = 0.0f;
        for (int r = 0; r < R; ++r) mins += D::add_factored(w[r], c, factors[r], acc);
        const __m256 m = _mm256_set1_ps(mins);
        for (int v = 0; v < V; ++v) acc[v] = _mm256_sub_ps(acc[v], m);
      } else {
        for (int r = 0; r < R; ++r) {
          __m256 wv[V];
          D::run(w[r], c, wv);
          for (int v = 0; v < V; ++v) acc[v] = _mm256_fmadd_ps(coef[r], wv[v], acc[v]);
        }
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

// The block scales of the integer one-token Q4_0 axpy (axpy_q4_0_int.h), gathered in general
// registers.
struct ScalesGpr {
  static __m256 chunk(const uint8_t* blocks, int count) {
    return scales_x8(blocks, sizeof(BlockQ4_0), count);
  }
};

template <typename D>
void axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
          size_t lda, int64_t nt, float* y, size_t ldy) {
  if constexpr (std::is_same_v<D, DecodeQ4_0>) {
    if (nt == 1) {
      return axpy_q4_0_int<Coefs8<ScalesGpr>>(n, static_cast<const uint8_t*>(w), ldw, idx, nr, a,
                                              y);
    }
  }
  for_each_axpy_pass(
      static_cast<const uint8_t*>(w), ldw, idx, nr, a, lda, nt,
      [&]<int R>(const uint8_t* const* rows, const uint8_t* const* next, const int64_t* js) {
        axpy_pass<D, R>(n, rows, next, js, a, lda, nt, y, ldy);
      });
}

void axpy_q4_0_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                     const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  axpy_q4_0_int_parts<Coefs8<ScalesGpr>>(n, static_cast<const uint8_t*>(w), ldw, idx, a, ends,
                                         n_parts, y, ldy);
}

}  // namespace

template <DType T>
void axpy_kquant(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                 const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  using D = std::conditional_t<T == DType::Q4_K, DecodeQ4_K,
                               std::conditional_t<T == DType::Q5_K, DecodeQ5_K, DecodeQ6_K>>;
  static_assert(T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K);
  axpy<D>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}
template void axpy_kquant<DType::Q4_K>(int64_t, const void*, size_t, const int32_t*, int64_t,
                                       const float*, size_t, int64_t, float*, size_t);
template void axpy_kquant<DType::Q5_K>(int64_t, const void*, size_t, const int32_t*, int64_t,
                                       const float*, size_t, int64_t, float*, size_t);
template void axpy_kquant<DType::Q6_K>(int64_t, const void*, size_t, const int32_t*, int64_t,
                                       const float*, size_t, int64_t, float*, size_t);

void axpy_q4_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy) {
  axpy<DecodeQ4_0>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

namespace {

// One token of Q4_K and Q6_K in integers (axpy_kquant_int.h), other token counts in floats.
template <DType T, typename Block, typename Coefs, typename Sums>
void kquant_int_axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt != 1) return axpy_kquant<T>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  axpy_kquant_int_parts<Block, Coefs, Sums>(n, static_cast<const uint8_t*>(w), ldw, idx, a, &nr, 1,
                                            y, 0);
}
template <typename Block, typename Coefs, typename Sums>
void kquant_int_axpy_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                           const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  axpy_kquant_int_parts<Block, Coefs, Sums>(n, static_cast<const uint8_t*>(w), ldw, idx, a, ends,
                                            n_parts, y, ldy);
}

}  // namespace

void set_axpy_kernels(Kernels& k) {
  k.f32.axpy = axpy<DecodeFloat<LoadF32>>;
  k.f16.axpy = axpy<DecodeFloat<LoadF16>>;
  k.bf16.axpy = axpy<DecodeFloat<LoadBf16>>;
  k.q8_0.axpy = axpy<DecodeQ8_0>;
  k.q4_0.axpy = axpy_q4_0;
  k.q4_0.axpy_parts = axpy_q4_0_parts;
  // The K-quants a neuron-major down of a K-quant file takes (the others keep the scalar
  // reference of generic::set_block_kernels).
  using SumsQ4_K = SumsQ4_K_256<DpAvx2>;
  using SumsQ6_K = SumsQ6_K_256<DpAvx2>;
  k.q4_k.axpy = kquant_int_axpy<DType::Q4_K, BlockQ4_K, CoefsQ4_K, SumsQ4_K>;
  k.q4_k.axpy_parts = kquant_int_axpy_parts<BlockQ4_K, CoefsQ4_K, SumsQ4_K>;
  k.q5_k.axpy = axpy_kquant<DType::Q5_K>;
  k.q6_k.axpy = kquant_int_axpy<DType::Q6_K, BlockQ6_K, CoefsQ6_K, SumsQ6_K>;
  k.q6_k.axpy_parts = kquant_int_axpy_parts<BlockQ6_K, CoefsQ6_K, SumsQ6_K>;
}

}  // namespace hearth::cpu::avx2
