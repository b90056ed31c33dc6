// Scalar axpy references: the definition of the sparse down projection's order of operations.
// Each active row is dequantized to floats exactly as dequantize_row does, then added to every
// token's output as y += a * w (multiply, round, add, round), rows in index order.
//
// Except one token of Q4_0, Q8_0 and the K-quants with integer kernels (decode's down
// projection), which works in 8-bit integers like the dense matvecs (kAxpyGroup in
// generic_kernels.h has the definition): per group of 32 active rows and per output block, the 32
// coefficients s_j = a_j * d_j are quantized to int8 with one scale S = max|s_j| / 127, and the
// weights' codes meet them in an exact integer sum. Accuracy: the only error beyond float
// rounding is |s_j - S t_j| <= S / 2 per term, so an output's error is at most
// sum_g (S_g / 2) * sum_{j in g} |q_{j,c}|, q the code (Q4_0: nibble - 8; Q8_0: the byte). That is
// the bound of the dense path, which rounds each activation to Q8_0 with the scale max|x| / 127
// of its 32 elements (there, x_j; here, x_j times its weight block's scale, since blocks run
// along the other axis). tests/kernels/sparse_matmul_test.cc (coef_quant_bound) holds the axpy to
// that bound.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/generic/block_codes.h"
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
  static constexpr int64_t kCols =
      T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1 || T == DType::IQ4_NL ? kQK : kQK_K;
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

// axpy_dense: axpy_rows's terms, into a zeroed y, from coefficients packed token-fastest.
template <typename D>
void axpy_dense_rows(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* coef, size_t ldc, int64_t nt, float* y, size_t ldy) {
  for (int64_t t = 0; t < nt; ++t) std::fill(y + t * ldy, y + t * ldy + n, 0.0f);
  const auto* wb = static_cast<const uint8_t*>(w);
  float wf[D::kCols];
  for (int64_t j = 0; j < nr; ++j) {
    const uint8_t* row = wb + static_cast<size_t>(idx[j]) * ldw;
    for (int64_t c = 0; c < n; c += D::kCols) {
      D::run(row, c, wf);
      for (int64_t t = 0; t < nt; ++t) {
        const float a = coef[j * static_cast<int64_t>(ldc) + t];
        float* yt = y + t * ldy + c;
        for (int64_t i = 0; i < D::kCols; ++i) yt[i] += a * wf[i];
      }
    }
  }
}

// The integer kernels' next group: up to kAxpyGroup active rows (nonzero coefficient) from
// position j on, into rows and coef; returns how many (0 once the list is used up).
int next_group(const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
               int64_t& j, const uint8_t** rows, float* coef) {
  int count = 0;
  for (; j < nr && count < kAxpyGroup; ++j) {
    if (a[j] == 0.0f) continue;
    rows[count] = wb + static_cast<size_t>(idx[j]) * ldw;
    coef[count++] = a[j];
  }
  return count;
}

// The integer code of weight i of a block of the legacy types with an integer one-token axpy.
struct IntQ4_0 {
  using Block = BlockQ4_0;
  static int code(const Block& b, int i) {
    return i < kQK / 2 ? (b.qs[i] & 0x0f) - 8 : (b.qs[i - kQK / 2] >> 4) - 8;
  }
};
struct IntQ8_0 {
  using Block = BlockQ8_0;
  static int code(const Block& b, int i) { return b.qs[i]; }
};

// One token of Q4_0 or Q8_0, integer sums (see the top of the file and kAxpyGroup).
template <typename C>
void axpy_legacy_int(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, float* y) {
  using Block = typename C::Block;
  const int64_t nb = n / kQK;
  int64_t j = 0;
  const uint8_t* group[kAxpyGroup];
  float coef[kAxpyGroup];
  while (const int count = next_group(wb, ldw, idx, nr, a, j, group, coef)) {
    const Block* rows[kAxpyGroup];
    for (int r = 0; r < count; ++r) rows[r] = reinterpret_cast<const Block*>(group[r]);
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
        for (int i = 0; i < kQK; ++i) sum[i] += t * C::code(rows[r][b], i);
      }
      float* yb = y + b * kQK;
      for (int i = 0; i < kQK; ++i) yb[i] += scale * static_cast<float>(sum[i]);
    }
  }
}

// One token of a K-quant in 8-bit integers (kAxpyGroup in generic_kernels.h): per group and per
// unit of 16 columns, s_j = a_j * (D_j * s_j,h) and, for types with mins, the float sum of
// a_j * (M_j * m_j,h), with D, s, M, m as block_codes.h reads them. Same accuracy argument as
// Q4_0, with |q| the block code (K4: the unsigned nibble or 5-bit code; Q6_K: q - 32).
template <typename Codes>
void axpy_codes_int(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx, int64_t nr,
                    const float* a, float* y) {
  constexpr int kUnit = kQK / 2;
  const int64_t nb = n / kQK;
  int64_t j = 0;
  const uint8_t* rows[kAxpyGroup];
  float coef[kAxpyGroup];
  while (const int count = next_group(wb, ldw, idx, nr, a, j, rows, coef)) {
    for (int64_t b = 0; b < nb; ++b) {
      BlockCodes codes[kAxpyGroup];
      for (int r = 0; r < count; ++r) Codes::get(rows[r], b, codes[r]);
      for (int h = 0; h < 2; ++h) {
        float s[kAxpyGroup];
        float m = 0.0f, mins = 0.0f;
        for (int r = 0; r < count; ++r) {
          const BlockCodes& c = codes[r];
          s[r] = coef[r] * (c.d * static_cast<float>(c.s[h]));
          m = std::max(m, std::fabs(s[r]));
          if (Codes::kHasMin) {
            const float term = coef[r] * (c.mf * static_cast<float>(c.m[h]));
            mins += term;
          }
        }
        float* yu = y + b * kQK + h * kUnit;
        if (m >= kAxpyMinScale) {
          const float inv = 127.0f / m, scale = m / 127.0f;
          int32_t sum[kUnit] = {};
          for (int r = 0; r < count; ++r) {
            const auto t = static_cast<int32_t>(std::nearbyint(s[r] * inv));
            for (int i = 0; i < kUnit; ++i) sum[i] += t * codes[r].q[h * kUnit + i];
          }
          for (int i = 0; i < kUnit; ++i) yu[i] += scale * static_cast<float>(sum[i]);
        }
        if (Codes::kHasMin) {
          for (int i = 0; i < kUnit; ++i) yu[i] += mins;
        }
      }
    }
  }
}

// Q4_0 and Q8_0: one token in integers, more tokens in floats.
template <typename C, typename D>
void axpy_legacy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                 const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt == 1) return axpy_legacy_int<C>(n, static_cast<const uint8_t*>(w), ldw, idx, nr, a, y);
  axpy_rows<D>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}

// The reference of axpy_parts: one call of a one-token axpy(idx, nr, a, y) per part.
template <typename Axpy>
void each_part(const int32_t* idx, const float* a, const int64_t* ends, int64_t n_parts, float* y,
               size_t ldy, const Axpy& axpy) {
  int64_t begin = 0;
  for (int64_t p = 0; p < n_parts; ++p) {
    axpy(idx + begin, ends[p] - begin, a + begin, y + static_cast<size_t>(p) * ldy);
    begin = ends[p];
  }
}
template <typename C>
void axpy_legacy_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                       const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  each_part(idx, a, ends, n_parts, y, ldy,
            [&](const int32_t* i, int64_t nr, const float* c, float* out) {
              axpy_legacy_int<C>(n, static_cast<const uint8_t*>(w), ldw, i, nr, c, out);
            });
}
template <typename D>
void axpy_rows_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                     const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  each_part(idx, a, ends, n_parts, y, ldy,
            [&](const int32_t* i, int64_t nr, const float* c, float* out) {
              axpy_rows<D>(n, w, ldw, i, nr, c, static_cast<size_t>(nr), 1, out, 0);
            });
}

// The Codes reading of the K-quants that have an integer one-token axpy.
template <DType T>
struct IntCodes;
template <>
struct IntCodes<DType::Q4_K> {
  using type = CodesQ4_K;
};
template <>
struct IntCodes<DType::Q6_K> {
  using type = CodesQ6_K;
};

}  // namespace

template <DType T>
void axpy_block_int(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                    const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt != 1) return axpy_rows<DecodeBlock<T>>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  axpy_codes_int<typename IntCodes<T>::type>(n, static_cast<const uint8_t*>(w), ldw, idx, nr, a, y);
}
template <DType T>
void axpy_block_int_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                          const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  int64_t begin = 0;
  for (int64_t p = 0; p < n_parts; ++p) {
    axpy_codes_int<typename IntCodes<T>::type>(n, static_cast<const uint8_t*>(w), ldw, idx + begin,
                                               ends[p] - begin, a + begin,
                                               y + static_cast<size_t>(p) * ldy);
    begin = ends[p];
  }
}
#define HEARTH_AXPY_INT(T)                                                                      \
  template void axpy_block_int<DType::T>(int64_t, const void*, size_t, const int32_t*, int64_t, \
                                         const float*, size_t, int64_t, float*, size_t);        \
  template void axpy_block_int_parts<DType::T>(int64_t, const void*, size_t, const int32_t*,    \
                                               const float*, const int64_t*, int64_t, float*,   \
                                               size_t);
HEARTH_AXPY_INT(Q4_K)
HEARTH_AXPY_INT(Q6_K)
#undef HEARTH_AXPY_INT

template <DType T>
void axpy_block_rows(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  axpy_rows<DecodeBlock<T>>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
}
#define HEARTH_AXPY_BLOCK(T)                                                                     \
  template void axpy_block_rows<DType::T>(int64_t, const void*, size_t, const int32_t*, int64_t, \
                                          const float*, size_t, int64_t, float*, size_t);
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
  k.f32.axpy_parts = axpy_rows_parts<DecodeF32>;
  k.f16.axpy_parts = axpy_rows_parts<DecodeF16>;
  k.bf16.axpy_parts = axpy_rows_parts<DecodeBf16>;
  k.f32.axpy_dense = axpy_dense_rows<DecodeF32>;
  k.f16.axpy_dense = axpy_dense_rows<DecodeF16>;
  k.bf16.axpy_dense = axpy_dense_rows<DecodeBf16>;
  k.q8_0.axpy = axpy_legacy<IntQ8_0, DecodeQ8_0>;
  k.q8_0.axpy_parts = axpy_legacy_parts<IntQ8_0>;
  k.q4_0.axpy = axpy_legacy<IntQ4_0, DecodeQ4_0>;
  k.q4_0.axpy_parts = axpy_legacy_parts<IntQ4_0>;
}

}  // namespace hearth::cpu::generic
