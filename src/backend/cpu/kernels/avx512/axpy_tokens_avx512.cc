// The float axpy of the AVX-512 table. Several tokens go through axpy_token_tiles.h on 16-lane
// vectors: 12 tokens of 2 vectors are 24 accumulators, beside 2 weight vectors and a broadcast, in
// the 32 registers, so each converted weight vector meets 12 tokens. One token walks its active
// rows 8 at a time, twice the AVX2 walk's 4: 8 weight streams in flight, and y loaded and stored
// once per 8 rows. Every path adds fma(w, a, y) per element in ascending j, the AVX2 walk's
// operations, so the outputs are the same bits.
#include <algorithm>

#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"
#include "backend/cpu/kernels/axpy_token_tiles.h"

namespace hearth::cpu::avx512 {
namespace {

constexpr int kWalkRows = 8;
// Rows gathered ahead of the walk, so each pass can prefetch the rows of the next one.
constexpr int kWalkWindow = 64;

// Adds R rows (coefficients coef[r]) to y over n columns, 32 at a time (two vectors), and
// prefetches the same columns of the next pass's rows: scattered rows are too short for the
// hardware prefetchers to ramp up on.
template <typename L, int R>
void walk_pass(int64_t n, const uint8_t* const* w, const uint8_t* const* next, const float* coef,
               float* y) {
  using V = Zmm<L>;
  __m512 c[R];
  for (int r = 0; r < R; ++r) c[r] = V::splat(coef[r]);
  constexpr int64_t kCols = 2 * V::kLanes;
  int64_t i = 0;
  for (; i + kCols <= n; i += kCols) {
    for (int64_t byte = 0; byte < kCols * V::kWeightBytes; byte += 64) {
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(next[r] + i * V::kWeightBytes + byte),
                     _MM_HINT_T0);
      }
    }
    __m512 acc0 = V::acts(y, i), acc1 = V::acts(y, i + V::kLanes);
    for (int r = 0; r < R; ++r) {
      acc0 = V::fma(c[r], V::weights(w[r], i), acc0);
      acc1 = V::fma(c[r], V::weights(w[r], i + V::kLanes), acc1);
    }
    V::store(y + i, acc0);
    V::store(y + i + V::kLanes, acc1);
  }
  for (; i < n; i += V::kLanes) {
    const int64_t count = n - i < V::kLanes ? n - i : V::kLanes;
    __m512 acc = V::acts_tail(y, i, count);
    for (int r = 0; r < R; ++r) acc = V::fma(c[r], V::weights_tail(w[r], i, count), acc);
    V::store_tail(y + i, acc, count);
  }
}

template <typename L, int R>
void walk_dispatch(int count, int64_t n, const uint8_t* const* w, const uint8_t* const* next,
                   const float* coef, float* y) {
  if constexpr (R > 1) {
    if (count < R) return walk_dispatch<L, R - 1>(count, n, w, next, coef, y);
  }
  walk_pass<L, R>(n, w, next, coef, y);
}

// y += a[j] * W[idx[j]] over the rows with a non-zero coefficient, in ascending j.
template <typename L>
void axpy_one_token(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                    const float* a, float* y) {
  const auto* wb = static_cast<const uint8_t*>(w);
  // Active rows [p, m) of the window; kWalkRows spare entries repeat the last row, so every pass
  // has kWalkRows valid rows to prefetch.
  const uint8_t* rows[kWalkWindow + kWalkRows];
  float coef[kWalkWindow];
  int p = 0, m = 0;
  int64_t j = 0;
  while (true) {
    if (m - p < 2 * kWalkRows && j < nr) {
      std::copy(rows + p, rows + m, rows);
      std::copy(coef + p, coef + m, coef);
      m -= p;
      p = 0;
      for (; j < nr && m < kWalkWindow; ++j) {
        if (a[j] == 0.0f) continue;
        rows[m] = wb + static_cast<size_t>(idx[j]) * ldw;
        coef[m++] = a[j];
      }
      for (int r = m; r < m + kWalkRows && m > 0; ++r) rows[r] = rows[m - 1];
    }
    if (p == m) return;
    const int count = std::min(kWalkRows, m - p);
    const uint8_t* const* next = p + count < m ? rows + p + count : rows + p;
    walk_dispatch<L, kWalkRows>(count, n, rows + p, next, coef + p, y);
    p += count;
  }
}

template <typename L, DType T>
void axpy_float(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) return axpy_one_token<L>(n, w, ldw, idx, nr, a, y);
  tiles::TokenAxpy<Zmm<L>, 12>::run(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

}  // namespace

void set_float_axpy_kernels(Kernels& k) {
  k.f32.axpy = axpy_float<LoadF32, DType::F32>;
  k.f16.axpy = axpy_float<LoadF16, DType::F16>;
  k.bf16.axpy = axpy_float<LoadBf16, DType::BF16>;
}

}  // namespace hearth::cpu::avx512
