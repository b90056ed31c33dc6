// Dequantization of the legacy, K-quant and IQ4 types (core/quant_blocks.h), bit-exact with
// ggml's reference dequantizers: every product and difference is formed in the same order, in
// float, from the same f16 scales (so the per-sub-block factors d * sc and dmin * m are rounded
// to float before they meet the codes, as ggml does).
#include "core/dequantize_blocks.h"

#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace hearth {
namespace {

float half(uint16_t h) { return fp16_to_fp32(h); }

void q4_1(const BlockQ4_1& b, float* y) {
  const float d = half(b.d), m = half(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0xf) * d + m;
    y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

void q5_0(const BlockQ5_0& b, float* y) {
  const float d = half(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q5_code(b.qs, b.qh, j) - 16) * d;
}

void q5_1(const BlockQ5_1& b, float* y) {
  const float d = half(b.d), m = half(b.m);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q5_code(b.qs, b.qh, j)) * d + m;
}

void iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = half(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[b.qs[j] & 0xf]);
    y[j + kQK / 2] = d * static_cast<float>(kIq4nlValues[b.qs[j] >> 4]);
  }
}

void q2_k(const BlockQ2_K& b, float* y) {
  const float d = half(b.d), dmin = half(b.dmin);
  for (int i = 0; i < kQK_K; ++i) {
    const uint8_t sc = b.scales[i / 16];
    const float dl = d * static_cast<float>(sc & 0xf), ml = dmin * static_cast<float>(sc >> 4);
    y[i] = dl * static_cast<float>(q2k_code(b.qs, i)) - ml;
  }
}

void q3_k(const BlockQ3_K& b, float* y) {
  const float d = half(b.d);
  for (int i = 0; i < kQK_K; ++i) {
    const float dl = d * static_cast<float>(q3k_scale(b.scales, i / 16) - 32);
    y[i] = dl * static_cast<float>(q3k_code(b, i));
  }
}

void q4_k(const BlockQ4_K& b, float* y) {
  const float d = half(b.d), dmin = half(b.dmin);
  for (int i = 0; i < kQK_K; ++i) {
    const ScaleMin sm = k4_scale_min(b.scales, i / 32);
    const float d1 = d * static_cast<float>(sm.scale), m1 = dmin * static_cast<float>(sm.min);
    y[i] = d1 * static_cast<float>(q4k_code(b.qs, i)) - m1;
  }
}

void q5_k(const BlockQ5_K& b, float* y) {
  const float d = half(b.d), dmin = half(b.dmin);
  for (int i = 0; i < kQK_K; ++i) {
    const ScaleMin sm = k4_scale_min(b.scales, i / 32);
    const float d1 = d * static_cast<float>(sm.scale), m1 = dmin * static_cast<float>(sm.min);
    y[i] = d1 * static_cast<float>(q5k_code(b, i)) - m1;
  }
}

void q6_k(const BlockQ6_K& b, float* y) {
  const float d = half(b.d);
  for (int i = 0; i < kQK_K; ++i) {
    y[i] = d * static_cast<float>(b.scales[i / 16]) * static_cast<float>(q6k_code(b, i) - 32);
  }
}

void iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = half(b.d);
  for (int ib = 0; ib < kQK_K / kQK; ++ib) {
    const float dl = d * static_cast<float>(iq4xs_scale(b, ib) - 32);
    const uint8_t* qs = b.qs + ib * kQK / 2;
    float* yb = y + ib * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      yb[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xf]);
      yb[j + kQK / 2] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

// Runs `one` over the n / block_size blocks of a row.
template <typename Block, void (*One)(const Block&, float*)>
void blocks(const void* x, float* y, int64_t n, int64_t block_size) {
  const auto* in = static_cast<const Block*>(x);
  for (int64_t b = 0; b < n / block_size; ++b) One(in[b], y + b * block_size);
}

}  // namespace

bool dequantize_row_blocks(DType t, const void* x, float* y, int64_t n) {
  switch (t) {
    case DType::Q4_1: blocks<BlockQ4_1, q4_1>(x, y, n, kQK); return true;
    case DType::Q5_0: blocks<BlockQ5_0, q5_0>(x, y, n, kQK); return true;
    case DType::Q5_1: blocks<BlockQ5_1, q5_1>(x, y, n, kQK); return true;
    case DType::IQ4_NL: blocks<BlockIQ4_NL, iq4_nl>(x, y, n, kQK); return true;
    case DType::Q2_K: blocks<BlockQ2_K, q2_k>(x, y, n, kQK_K); return true;
    case DType::Q3_K: blocks<BlockQ3_K, q3_k>(x, y, n, kQK_K); return true;
    case DType::Q4_K: blocks<BlockQ4_K, q4_k>(x, y, n, kQK_K); return true;
    case DType::Q5_K: blocks<BlockQ5_K, q5_k>(x, y, n, kQK_K); return true;
    case DType::Q6_K: blocks<BlockQ6_K, q6_k>(x, y, n, kQK_K); return true;
    case DType::IQ4_XS: blocks<BlockIQ4_XS, iq4_xs>(x, y, n, kQK_K); return true;
    default: return false;
  }
}

}  // namespace hearth
