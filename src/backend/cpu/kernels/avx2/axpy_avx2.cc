// axpy (the sparse down projection): y[t] += a[t, j] * W[idx[j]] for the active rows j. Decode
// reads each active row once and the output over and over, so rows go R at a time: one pass over y
// (loaded into registers, R FMAs, stored) per R rows keeps y's traffic in L1 and puts R weight
// streams in flight. Per output element the FMAs still run in ascending j, the reference's
// order, so results differ from it only by FMA rounding and do not depend on how the caller
// splits the columns. One token of Q4_0 and Q8_0 goes through integer sums instead
// (axpy_legacy_int.h), as the reference does, and one token of float rows through the row walk
// the AVX-512 table shares (axpy_row_walk.h).
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
#include "backend/cpu/kernels/avx2/axpy_legacy_int.h"
#include "backend/cpu/kernels/avx2/axpy_window.h"
#include "backend/cpu/kernels/avx2/float_loads.h"

// After them, so the templates are AVX2 code even where the build's flags are missing.
#include "backend/cpu/kernels/axpy_row_walk.h"

namespace hearth::cpu::avx2 {
namespace {

// Float rows per pass of the one-token walk (axpy_row_walk.h): 8 coefficients, two
// accumulators and the converted weights fit the 16 registers.
constexpr int kFloatWalkRows = 8;

// A decoder turns the kVecs * 8 columns from c of a quantized row into float vectors, exactly as
// dequantize_row computes them, a block at a time (n is a multiple of the block).
struct DecodeQ8_0 {
  static constexpr int kVecs = 4;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ8_0);
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
struct DecodeQ4_0 {
  static constexpr int kVecs = 4;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_0);
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

// Adds R rows (coefficients a[t * lda + j[r]]) to nt output rows. `next` are the rows of the
// following pass: the same offsets of them are prefetched as this pass goes, so their DRAM
// latency overlaps this pass's work (rows are scattered and short, too short for the hardware
// prefetchers to catch on).
template <typename D, int R>
void axpy_pass(int64_t n, const uint8_t* const* w, const uint8_t* const* next, const int64_t* j,
               const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
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
}

template <typename D>
void axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
          size_t lda, int64_t nt, float* y, size_t ldy) {
  if constexpr (std::is_same_v<D, DecodeQ4_0>) {
    if (nt == 1) {
      return axpy_legacy_int<BlockQ4_0, Coefs8<ScalesGpr<BlockQ4_0>>, SumsAvx2>(
          n, static_cast<const uint8_t*>(w), ldw, idx, nr, a, y);
    }
  }
  if constexpr (std::is_same_v<D, DecodeQ8_0>) {
    if (nt == 1) {
      return axpy_legacy_int<BlockQ8_0, Coefs8<ScalesGpr<BlockQ8_0>>, SumsQ8Avx2>(
          n, static_cast<const uint8_t*>(w), ldw, idx, nr, a, y);
    }
  }
  for_each_axpy_pass(
      static_cast<const uint8_t*>(w), ldw, idx, nr, a, lda, nt,
      [&]<int R>(const uint8_t* const* rows, const uint8_t* const* next, const int64_t* js) {
        axpy_pass<D, R>(n, rows, next, js, a, lda, nt, y, ldy);
      });
}

template <typename Block, typename Sums>
void axpy_legacy_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                       const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  axpy_legacy_int_parts<Block, Coefs8<ScalesGpr<Block>>, Sums>(n, static_cast<const uint8_t*>(w),
                                                               ldw, idx, a, ends, n_parts, y, ldy);
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

namespace {

// The table's float entries: one token through the row walk, several through the column-blocked
// product; the same FMAs per output element either way.
template <DType T, typename L>
void axpy_float(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt > 1) return axpy_float_tokens(T, n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  tiles::RowWalk<Ymm<L>, kFloatWalkRows>::run(n, w, ldw, idx, nr, a, y);
}

template <typename L>
void axpy_float_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                      const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  tiles::RowWalk<Ymm<L>, kFloatWalkRows>::run_parts(n, w, ldw, idx, a, ends, n_parts, y, ldy);
}

}  // namespace

void axpy_q4_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy) {
  axpy<DecodeQ4_0>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

void axpy_q8_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy) {
  axpy<DecodeQ8_0>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
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
  k.f32.axpy = axpy_float<DType::F32, LoadF32>;
  k.f16.axpy = axpy_float<DType::F16, LoadF16>;
  k.bf16.axpy = axpy_float<DType::BF16, LoadBf16>;
  k.f32.axpy_parts = axpy_float_parts<LoadF32>;
  k.f16.axpy_parts = axpy_float_parts<LoadF16>;
  k.bf16.axpy_parts = axpy_float_parts<LoadBf16>;
  set_float_axpy_dense_kernels(k);
  k.q8_0.axpy = axpy_q8_0;
  k.q8_0.axpy_parts = axpy_legacy_parts<BlockQ8_0, SumsQ8Avx2>;
  k.q4_0.axpy = axpy_q4_0;
  k.q4_0.axpy_parts = axpy_legacy_parts<BlockQ4_0, SumsAvx2>;
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
