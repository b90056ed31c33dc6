// The one-token K-quant axpy of the AVX-512 table: the AVX2 kernel's passes (the same rows per
// pass from avx2/axpy_window.h, the same per-super-block factors, the same per-element FMAs in
// ascending row order and the same per-pass min terms) with 16 columns per vector, so a
// sub-block of 32 codes is two widenings, two conversions and two FMAs instead of four of each.
// The outputs are the same bits as the AVX2 kernel's. Other token counts stay AVX2.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/axpy_kquant_decode.h"
#include "backend/cpu/kernels/avx2/axpy_window.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {
namespace {

// acc[0] += s * (codes 0-15), acc[1] += s * (codes 16-31): the AVX2 kernel's four 8-column
// vectors, two at a time.
template <bool kSigned>
void add_codes(__m256i q, __m512 s_lo, __m512 s_hi, __m512* acc) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const auto widen = [](__m128i b) {
    return _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
  };
  acc[0] = _mm512_fmadd_ps(s_lo, widen(lo), acc[0]);
  acc[1] = _mm512_fmadd_ps(s_hi, widen(hi), acc[1]);
}

// Q4_K and Q5_K: one scale per 32 codes, and a min term per pass (returned).
template <typename Block, typename Codes>
struct WideK4 {
  using Decode = avx2::DecodeK4<Block, Codes>;
  static float add(const uint8_t* row, int64_t c, const float* f, __m512* acc) {
    int sub;
    const Block& b = avx2::k_block<Block>(row, c, sub);
    const __m512 s = _mm512_set1_ps(f[sub]);
    add_codes<false>(Codes::get(b, sub), s, s, acc);
    return f[8 + sub];
  }
};

// Q6_K: a scale per 16 codes, no min term.
struct WideQ6_K {
  using Decode = avx2::DecodeQ6_K;
  static float add(const uint8_t* row, int64_t c, const float* f, __m512* acc) {
    int sub;
    const BlockQ6_K& b = avx2::k_block<BlockQ6_K>(row, c, sub);
    add_codes<true>(avx2::k6_codes(b, sub), _mm512_set1_ps(f[2 * sub]),
                    _mm512_set1_ps(f[2 * sub + 1]), acc);
    return 0.0f;
  }
};

// One pass of R rows (coefficients a[j[r]]) over y[n]; `next` as in the AVX2 pass.
template <typename W, int R>
void pass(int64_t n, const uint8_t* const* w, const uint8_t* const* next, const int64_t* j,
          const float* a, float* y) {
  using D = typename W::Decode;
  constexpr int64_t kCols = 32;
  // Prefetch once per cache line of weights: every kLineChunks chunks of 32 columns.
  constexpr int64_t kLineChunks = D::kChunkBytes >= 64 ? 1 : 64 / D::kChunkBytes;
  alignas(64) float factors[R][16];
  for (int64_t c = 0; c + kCols <= n; c += kCols) {
    if ((c / kCols) % kLineChunks == 0) {
      const int64_t offset = c / kCols * D::kChunkBytes;
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(next[r] + offset), _MM_HINT_T0);
      }
    }
    if (c % kQK_K == 0) {
      for (int r = 0; r < R; ++r) D::set_factors(w[r], c, a[j[r]], factors[r]);
    }
    __m512 acc[2] = {_mm512_loadu_ps(y + c), _mm512_loadu_ps(y + c + 16)};
    float mins = 0.0f;
    for (int r = 0; r < R; ++r) mins += W::add(w[r], c, factors[r], acc);
    const __m512 m = _mm512_set1_ps(mins);
    _mm512_storeu_ps(y + c, _mm512_sub_ps(acc[0], m));
    _mm512_storeu_ps(y + c + 16, _mm512_sub_ps(acc[1], m));
  }
}

template <typename W, auto kOtherCounts>
void axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
          size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt != 1) return kOtherCounts(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  avx2::for_each_axpy_pass(static_cast<const uint8_t*>(w), ldw, idx, nr, a, lda, nt,
                           [&]<int R>(const uint8_t* const* rows, const uint8_t* const* next,
                                      const int64_t* js) { pass<W, R>(n, rows, next, js, a, y); });
}

}  // namespace

void set_kquant_axpy_kernels(Kernels& k) {
  k.q4_k.axpy = axpy<WideK4<BlockQ4_K, avx2::CodesQ4_K>, avx2::axpy_kquant<DType::Q4_K>>;
  k.q5_k.axpy = axpy<WideK4<BlockQ5_K, avx2::CodesQ5_K>, avx2::axpy_kquant<DType::Q5_K>>;
  k.q6_k.axpy = axpy<WideQ6_K, avx2::axpy_kquant<DType::Q6_K>>;
}

}  // namespace hearth::cpu::avx512
