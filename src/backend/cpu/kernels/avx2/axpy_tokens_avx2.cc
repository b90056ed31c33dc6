// The several-token float axpy of the AVX2 table (axpy_token_tiles.h) on 8-lane vectors: 6
// tokens of 2 vectors are 12 accumulators, beside 2 weight vectors and a broadcast, in the 16
// registers.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/float_loads.h"

// After it, so the templates are AVX2 code even where the build's flags are missing.
#include "backend/cpu/kernels/axpy_token_tiles.h"

namespace hearth::cpu::avx2 {

void axpy_float_tokens(DType t, int64_t n, const void* w, size_t ldw, const int32_t* idx,
                       int64_t nr, const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  switch (t) {
    case DType::F32:
      return tiles::TokenAxpy<Ymm<LoadF32>, 6>::run(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
    case DType::F16:
      return tiles::TokenAxpy<Ymm<LoadF16>, 6>::run(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
    default:
      return tiles::TokenAxpy<Ymm<LoadBf16>, 6>::run(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  }
}

namespace {

template <typename L>
void axpy_dense(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                const float* coef, size_t ldc, int64_t nt, float* y, size_t ldy) {
  tiles::TokenAxpy<Ymm<L>, 6>::dense(n, w, ldw, idx, nr, coef, ldc, nt, y, ldy);
}

}  // namespace

void set_float_axpy_dense_kernels(Kernels& k) {
  k.f32.axpy_dense = axpy_dense<LoadF32>;
  k.f16.axpy_dense = axpy_dense<LoadF16>;
  k.bf16.axpy_dense = axpy_dense<LoadBf16>;
}

}  // namespace hearth::cpu::avx2
