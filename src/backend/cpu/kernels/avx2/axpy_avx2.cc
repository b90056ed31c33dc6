// axpy (the sparse down projection): y[t] += a[t, j] * W[idx[j]] for the active rows j. Decode
// reads each active row once and the output over and over, so rows go R at a time: one pass over y
// (loaded into registers, R FMAs, stored) per R rows keeps y's traffic in L1 and puts R weight
// streams in flight. Per output element the FMAs still run in ascending j, the reference's
// order, so results differ from it only by FMA rounding and do not depend on how the caller
// splits the columns.
#include <algorithm>

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
  static void run(const uint8_t* row, int64_t c, __m256* out) { out[0] = L::load8(row, c); }
};

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

// The compute-bound case (a Q4_0 row is 4.5 bits a weight), so the decode is lean: 8 bytes
// widened to int32 lanes hold 8 low nibbles (weights k..k+7) and, shifted, the 8 high ones
// (weights 16+k..); d * (u - 8) is then one FMA, u * d - 8 * d, exact like the reference's
// product (it is representable), so the bits match dequantize_row (up to the sign of a zero).
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

// Active rows are collected into a window of up to kWindow, topped up whenever fewer than two
// passes' worth remain, so every pass knows the rows of the next.
constexpr int kWindow = 64;

template <typename D>
void axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
          size_t lda, int64_t nt, float* y, size_t ldy) {
  static_assert(kRows == 4, "the switch below covers 1 to 4 rows");
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
