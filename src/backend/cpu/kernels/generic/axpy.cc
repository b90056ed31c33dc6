// Scalar axpy references: the definition of the sparse down projection's order of operations.
// Each active row is dequantized to floats exactly as dequantize_row does, then added to every
// token's output as y += a * w (multiply, round, add, round), rows in index order.
//
// Except one-token Q4_0 (decode's down projection), which works in 8-bit integers like the dense
// Q4_0 matvec (kAxpyGroup in generic_kernels.h has the definition): per group of 32 active rows
// and per output block, the 32 coefficients s_j = a_j * d_j are quantized to int8 with one scale
// S = max|s_j| / 127, and the weights' nibbles meet them in an exact integer sum. Accuracy: the
// only error beyond float rounding is |s_j - S t_j| <= S / 2 per term, so an output's error is
// at most sum_g (S_g / 2) * sum_{j in g} |q_{j,c} - 8|. That is the bound of the dense path,
// which rounds each activation to Q8_0 with the scale max|x| / 127 of its 32 elements (there,
// x_j; here, x_j times its weight block's scale, since blocks run along the other axis).
// tests/kernels/sparse_matmul_test.cc (coef_quant_bound) holds the axpy to that bound.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quantize.h"

namespace hearth::cpu::generic {
namespace {

// Decodes the columns [c, c + kCols) of a weight row; kCols is one block (32 for quantized
// types), so a quantized block's scale is read once.
struct DecodeF32 {
  static constexpr int64_t kCols = 1;
  static void run(const uint8_t* row, int64_t c, float* out) {
    std::memcpy(out, row + c * sizeof(float), sizeof(float));
  }
};
struct DecodeF16 {
  static constexpr int64_t kCols = 1;
  static void run(const uint8_t* row, int64_t c, float* out) {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    *out = fp16_to_fp32(h);
  }
};
struct DecodeBf16 {
  static constexpr int64_t kCols = 1;
  static void run(const uint8_t* row, int64_t c, float* out) {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    *out = bf16_to_fp32(h);
  }
};
struct DecodeQ8_0 {
  static constexpr int64_t kCols = kQK;
  static void run(const uint8_t* row, int64_t c, float* out) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[c / kQK];
    const float d = fp16_to_fp32(b.d);
    for (int64_t j = 0; j < kQK; ++j) out[j] = d * static_cast<float>(b.qs[j]);
  }
};
struct DecodeQ4_0 {
  static constexpr int64_t kCols = kQK;
  static void run(const uint8_t* row, int64_t c, float* out) {
    const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[c / kQK];
    const float d = fp16_to_fp32(b.d);
    for (int64_t j = 0; j < kQK / 2; ++j) {
      out[j] = d * static_cast<float>((b.qs[j] & 0x0f) - 8);
      out[j + kQK / 2] = d * static_cast<float>((b.qs[j] >> 4) - 8);
    }
  }
};

// A block of any type of core/quant_blocks.h, through dequantize_row (so bit-exact with it).
template <DType T>
struct DecodeBlock {
  static constexpr int64_t kCols = T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1 ||
                                           T == DType::IQ4_NL
                                       ? kQK
                                       : kQK_K;
  static void run(const uint8_t* row, int64_t c, float* out) {
    dequantize_row(T, row + c / kCols * dtype_block_bytes(T), out, kCols);
  }
};

template <typename D>
void axpy_rows(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               size_t lda, int64_t nt, float* y, size_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  float wf[D::kCols];
  for (int64_t j = 0; j < nr; ++j) {
    if (!axpy_row_active(a, lda, nt, j)) continue;
    const uint8_t* row = wb + static_cast<size_t>(idx[j]) * ldw;
    for (int64_t c = 0; c < n; c += D::kCols) {
      D::run(row, c, wf);
      for (int64_t t = 0; t < nt; ++t) {
        const float coef = a[t * lda + j];
        float* yt = y + t * ldy + c;
        for (int64_t i = 0; i < D::kCols; ++i) yt[i] += coef * wf[i];
      }
    }
  }
}

// One token, Q4_0, integer sums (see the top of the file and kAxpyGroup).
void axpy_q4_0_int(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr,
                   const float* a, float* y) {
  const int64_t nb = n / kQK;
  int64_t j = 0;
  while (j < nr) {
    const BlockQ4_0* rows[kAxpyGroup];
    float coef[kAxpyGroup];
    int count = 0;
    for (; j < nr && count < kAxpyGroup; ++j) {
      if (a[j] == 0.0f) continue;
      rows[count] = reinterpret_cast<const BlockQ4_0*>(wb + static_cast<size_t>(idx[j]) * ldw);
      coef[count++] = a[j];
    }
    if (count == 0) break;
    for (int64_t b = 0; b < nb; ++b) {
      float s[kAxpyGroup];
      float m = 0.0f;
      for (int r = 0; r < count; ++r) {
        s[r] = coef[r] * fp16_to_fp32(rows[r][b].d);
        m = std::max(m, std::fabs(s[r]));
      }
      if (m < kAxpyMinScale) continue;
      const float inv = 127.0f / m, scale = m / 127.0f;
      int32_t sum[kQK] = {};
      for (int r = 0; r < count; ++r) {
        const auto t = static_cast<int32_t>(std::nearbyint(s[r] * inv));
        const uint8_t* qs = rows[r][b].qs;
        for (int i = 0; i < kQK / 2; ++i) {
          sum[i] += t * ((qs[i] & 0x0f) - 8);
          sum[i + kQK / 2] += t * ((qs[i] >> 4) - 8);
        }
      }
      float* yb = y + b * kQK;
      for (int i = 0; i < kQK; ++i) yb[i] += scale * static_cast<float>(sum[i]);
    }
  }
}

void axpy_q4_0(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
               const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) return axpy_q4_0_int(n, static_cast<const uint8_t*>(w), ldw, idx, nr, a, y);
  axpy_rows<DecodeQ4_0>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

// The reference of axpy_parts: one call per part.
void axpy_q4_0_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                     const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  int64_t begin = 0;
  for (int64_t p = 0; p < n_parts; ++p) {
    axpy_q4_0_int(n, static_cast<const uint8_t*>(w), ldw, idx + begin, ends[p] - begin, a + begin,
                  y + static_cast<size_t>(p) * ldy);
    begin = ends[p];
  }
}

}  // namespace

template <DType T>
void axpy_block_rows(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  axpy_rows<DecodeBlock<T>>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}
#define HEARTH_AXPY_BLOCK(T)                                                                \
  template void axpy_block_rows<DType::T>(int64_t, const void*, size_t, const int32_t*,     \
                                          int64_t, const float*, size_t, int64_t, float*, \
                                          size_t);
HEARTH_AXPY_BLOCK(Q4_1)
HEARTH_AXPY_BLOCK(Q5_0)
HEARTH_AXPY_BLOCK(Q5_1)
HEARTH_AXPY_BLOCK(IQ4_NL)
HEARTH_AXPY_BLOCK(Q2_K)
HEARTH_AXPY_BLOCK(Q3_K)
HEARTH_AXPY_BLOCK(Q4_K)
HEARTH_AXPY_BLOCK(Q5_K)
HEARTH_AXPY_BLOCK(Q6_K)
HEARTH_AXPY_BLOCK(IQ4_XS)
#undef HEARTH_AXPY_BLOCK

void set_axpy_kernels(Kernels& k) {
  k.f32.axpy = axpy_rows<DecodeF32>;
  k.f16.axpy = axpy_rows<DecodeF16>;
  k.bf16.axpy = axpy_rows<DecodeBf16>;
  k.q8_0.axpy = axpy_rows<DecodeQ8_0>;
  k.q4_0.axpy = axpy_q4_0;
  k.q4_0.axpy_parts = axpy_q4_0_parts;
}

}  // namespace hearth::cpu::generic
