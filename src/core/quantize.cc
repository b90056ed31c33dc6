#include "core/quantize.h"

#include <cmath>
#include <cstring>

#include "core/dequantize_blocks.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/quantize_blocks.h"

namespace hearth {
namespace {

void check_row_length(DType t, int64_t n) {
  if (n < 0 || n % dtype_block_size(t) != 0) {
    fail("row length ", n, " is not a multiple of the ", dtype_name(t), " block size (",
         dtype_block_size(t), ")");
  }
}

}  // namespace

void quantize_block_q8_0(const float* x, BlockQ8_0* y) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  // ggml multiplies by the reciprocal instead of dividing by d; the two round differently, and
  // matching its bytes matters more than the last ulp.
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = fp32_to_fp16(d);
  for (int64_t j = 0; j < kQK; ++j) {
    y->qs[j] = static_cast<int8_t>(std::round(x[j] * id));  // half away from zero, like roundf
  }
}

void quantize_block_q4_0(const float* x, BlockQ4_0* y) {
  // The scale is derived from the signed value of largest magnitude (the first one on ties), so
  // that value maps exactly to -8 and the asymmetric range [-8, 7] is used fully.
  float amax = 0.0f, max = 0.0f;
  for (int64_t j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = fp32_to_fp16(d);
  for (int64_t j = 0; j < kQK / 2; ++j) {
    // +8.5 then truncation toward zero is ggml's rounding (not round-to-nearest for negatives
    // below -8.5, which cannot occur); the clamp catches +8 which would overflow the nibble.
    const int lo = static_cast<int8_t>(x[j] * id + 8.5f);
    const int hi = static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f);
    y->qs[j] = static_cast<uint8_t>((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
  }
}

void quantize_row(DType t, const float* x, void* y, int64_t n) {
  check_row_length(t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      auto* out = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
      return;
    }
    case DType::BF16: {
      auto* out = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_bf16(x[i]);
      return;
    }
    case DType::Q8_0: {
      auto* out = static_cast<BlockQ8_0*>(y);
      for (int64_t b = 0; b < n / kQK; ++b) quantize_block_q8_0(x + b * kQK, out + b);
      return;
    }
    case DType::Q4_0: {
      auto* out = static_cast<BlockQ4_0*>(y);
      for (int64_t b = 0; b < n / kQK; ++b) quantize_block_q4_0(x + b * kQK, out + b);
      return;
    }
    default:
      if (quantize_row_blocks(t, x, y, n)) return;
  }
  fail("cannot quantize to dtype id ", static_cast<uint32_t>(t));
}

void quantize_row_quick(DType t, const float* x, void* y, int64_t n) {
  check_row_length(t, n);
  if (!quantize_row_blocks_quick(t, x, y, n)) quantize_row(t, x, y, n);
}

void dequantize_row(DType t, const void* x, float* y, int64_t n) {
  check_row_length(t, n);
  switch (t) {
    case DType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      const auto* in = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(in[i]);
      return;
    }
    case DType::BF16: {
      const auto* in = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(in[i]);
      return;
    }
    case DType::Q8_0: {
      const auto* in = static_cast<const BlockQ8_0*>(x);
      for (int64_t b = 0; b < n / kQK; ++b) {
        const float d = fp16_to_fp32(in[b].d);
        for (int64_t j = 0; j < kQK; ++j) y[b * kQK + j] = d * static_cast<float>(in[b].qs[j]);
      }
      return;
    }
    case DType::Q4_0: {
      const auto* in = static_cast<const BlockQ4_0*>(x);
      for (int64_t b = 0; b < n / kQK; ++b) {
        const float d = fp16_to_fp32(in[b].d);
        for (int64_t j = 0; j < kQK / 2; ++j) {
          y[b * kQK + j] = d * static_cast<float>((in[b].qs[j] & 0x0f) - 8);
          y[b * kQK + j + kQK / 2] = d * static_cast<float>((in[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    default:
      if (dequantize_row_blocks(t, x, y, n)) return;
  }
  fail("cannot dequantize dtype id ", static_cast<uint32_t>(t));
}

void quantize_rows(DType t, const float* x, void* y, int64_t rows, int64_t cols) {
  const int64_t rb = row_bytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(t, x + r * cols, static_cast<uint8_t*>(y) + r * rb, cols);
  }
}

}  // namespace hearth
