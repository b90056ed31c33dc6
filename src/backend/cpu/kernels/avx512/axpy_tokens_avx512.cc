// The float axpy of the AVX-512 table. Several tokens go through axpy_token_tiles.h on 16-lane
// vectors: 12 tokens of 2 vectors are 24 accumulators, beside 2 weight vectors and a broadcast, in
// the 32 registers, so each converted weight vector meets 12 tokens. One token walks its active
// rows 8 at a time (axpy_row_walk.h), as one token over parts does. Both add fma(w, a, y) per
// element in ascending j, as the AVX2 table does, so the outputs are the same bits.
#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"
#include "backend/cpu/kernels/axpy_row_walk.h"
#include "backend/cpu/kernels/axpy_token_tiles.h"

namespace hearth::cpu::avx512 {
namespace {

template <typename L>
void axpy_float(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) return tiles::RowWalk<Zmm<L>, 8>::run(n, w, ldw, idx, nr, a, y);
  tiles::TokenAxpy<Zmm<L>, 12>::run(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

template <typename L>
void axpy_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  tiles::RowWalk<Zmm<L>, 8>::run_parts(n, w, ldw, idx, a, ends, n_parts, y, ldy);
}

template <typename L>
void axpy_dense(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                const float* coef, size_t ldc, int64_t nt, float* y, size_t ldy) {
  tiles::TokenAxpy<Zmm<L>, 12>::dense(n, w, ldw, idx, nr, coef, ldc, nt, y, ldy);
}

}  // namespace

void set_float_axpy_kernels(Kernels& k) {
  k.f32.axpy = axpy_float<LoadF32>;
  k.f16.axpy = axpy_float<LoadF16>;
  k.bf16.axpy = axpy_float<LoadBf16>;
  k.f32.axpy_parts = axpy_parts<LoadF32>;
  k.f16.axpy_parts = axpy_parts<LoadF16>;
  k.bf16.axpy_parts = axpy_parts<LoadBf16>;
  k.f32.axpy_dense = axpy_dense<LoadF32>;
  k.f16.axpy_dense = axpy_dense<LoadF16>;
  k.bf16.axpy_dense = axpy_dense<LoadBf16>;
}

}  // namespace hearth::cpu::avx512
