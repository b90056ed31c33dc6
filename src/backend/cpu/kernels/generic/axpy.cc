// Scalar axpy references: the definition of the sparse down projection's order of operations.
// Each active row is dequantized to floats exactly as dequantize_row does, then added to every
// token's output as y += a * w (multiply, round, add, round), rows in index order.
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"

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

}  // namespace

void set_axpy_kernels(Kernels& k) {
  k.f32.axpy = axpy_rows<DecodeF32>;
  k.f16.axpy = axpy_rows<DecodeF16>;
  k.bf16.axpy = axpy_rows<DecodeBf16>;
  k.q8_0.axpy = axpy_rows<DecodeQ8_0>;
  k.q4_0.axpy = axpy_rows<DecodeQ4_0>;
}

}  // namespace hearth::cpu::generic
