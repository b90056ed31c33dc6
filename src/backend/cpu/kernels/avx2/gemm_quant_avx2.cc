// Q8_0 and Q4_0 weights against Q8 activation rows: 8-bit integer products (maddubs/madd), one
// float FMA per block pair with the product of the two block scales. Tiles unpack each weight
// block once and use it for every activation row of the tile.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "core/dtype.h"
#include "backend/cpu/kernels/avx2/avx2_util.h"  // last: it switches on AVX2 code generation

namespace hearth::cpu::avx2 {
namespace {

struct WeightQ8_0 {
  using Block = BlockQ8_0;
  static __m256i load(const Block* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
  }
};
struct WeightQ4_0 {
  using Block = BlockQ4_0;
  static __m256i load(const Block* b) {
    return _mm256_sub_epi8(unpack_nibbles(b->qs), _mm256_set1_epi8(8));
  }
};

template <typename WB>
struct QuantTiles {
  template <int R, int T>
  static void tile(int64_t n, const uint8_t* w, size_t ldw, const uint8_t* x, size_t ldx,
                   float* y, size_t ldy) {
    using Block = typename WB::Block;
    const int64_t nb = n / kQK;
    const Block* wr[R];
    for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const Block*>(w + r * ldw);
    const int8_t* xq[T];
    const float* xd[T];
    for (int t = 0; t < T; ++t) {
      xq[t] = reinterpret_cast<const int8_t*>(x + t * ldx);
      xd[t] = reinterpret_cast<const float*>(xq[t] + n);
    }
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i wq[R], wa[R];
      __m256 dw[R];
      for (int r = 0; r < R; ++r) {
        wq[r] = WB::load(wr[r] + b);
        wa[r] = _mm256_sign_epi8(wq[r], wq[r]);
        dw[r] = _mm256_set1_ps(half_to_float(wr[r][b].d));
      }
      for (int t = 0; t < T; ++t) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + b * kQK));
        const __m256 dx = _mm256_broadcast_ss(xd[t] + b);
        for (int r = 0; r < R; ++r) {
          const __m256 sum = _mm256_cvtepi32_ps(dot_i8(wa[r], wq[r], xv));
          acc[r][t] = _mm256_fmadd_ps(sum, _mm256_mul_ps(dw[r], dx), acc[r][t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) y[t * ldy + r] = hsum(acc[r][t]);
    }
  }
};

template <typename WB>
void gemm_quant(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
                int64_t nt, float* y, size_t ldy) {
  if (nt == 1) {
    TileSet<QuantTiles<WB>, 4, 1>::gemm(n, w, ldw, nr, x, ldx, nt, y, ldy);
  } else {
    TileSet<QuantTiles<WB>, 2, 4>::gemm(n, w, ldw, nr, x, ldx, nt, y, ldy);
  }
}

template <typename WB>
float dot_quant(int64_t n, const void* w, const void* x) {
  float y;
  QuantTiles<WB>::template tile<1, 1>(n, static_cast<const uint8_t*>(w), 0,
                                      static_cast<const uint8_t*>(x), 0, &y, 0);
  return y;
}

}  // namespace

float dot_q8_0(int64_t n, const void* w, const void* x) { return dot_quant<WeightQ8_0>(n, w, x); }
float dot_q4_0(int64_t n, const void* w, const void* x) { return dot_quant<WeightQ4_0>(n, w, x); }

void gemm_q8_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  gemm_quant<WeightQ8_0>(n, w, ldw, nr, x, ldx, nt, y, ldy);
}
void gemm_q4_0(int64_t n, const void* w, size_t ldw, int64_t nr, const void* x, size_t ldx,
               int64_t nt, float* y, size_t ldy) {
  gemm_quant<WeightQ4_0>(n, w, ldw, nr, x, ldx, nt, y, ldy);
}

}  // namespace hearth::cpu::avx2
