// Quantizers of the 32-weight block types beyond Q8_0/Q4_0: Q4_1, Q5_0, Q5_1 and IQ4_NL.
//
// The references are ggml's: Q4_1/Q5_1 spread [min, max] evenly over the codes, Q5_0 maps the
// value of largest magnitude to -16 (as Q4_0 does to -8), IQ4_NL searches a scale over its
// non-linear table with weights x^2. The searches fit the scale (and minimum) by weighted least
// squares over a few trial scales (quantize_fit.h), with weights qw * sqrt(sigma2 + x^2).
// Either way the codes are finally rounded to the scale as stored in f16, so they are the
// nearest ones to what dequantization will use.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/block_codec.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quantize_fit.h"

namespace hearth {
namespace {

using qfit::nearest_int;

// Nibbles: weights 0..15 low, 16..31 high.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0xf) | (L[j + kQK / 2] & 0xf) << 4);
  }
}

// 5-bit codes: the nibbles as above, the fifth bit of weight j at bit j of qh (little-endian).
void pack_q5(const uint8_t* L, uint8_t* qs, uint8_t* qh) {
  pack_nibbles(L, qs);
  std::memset(qh, 0, 4);
  for (int j = 0; j < kQK; ++j) qh[j / 8] |= static_cast<uint8_t>((L[j] >> 4) << (j % 8));
}

// Codes of x ~ d * q + m rounded to the stored (f16) d and m, q in [0, nmax].
void round_affine(const float* x, uint16_t d16, uint16_t m16, int nmax, uint8_t* L) {
  const float d = fp16_to_fp32(d16), m = fp16_to_fp32(m16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    L[j] = static_cast<uint8_t>(std::clamp(nearest_int((x[j] - m) * id), 0, nmax));
  }
}

// ggml's reference for Q4_1 / Q5_1: the range [min, max] in nmax equal steps.
void affine_reference(const float* x, int nmax, uint16_t* d16, uint16_t* m16, uint8_t* L) {
  float min = x[0], max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / static_cast<float>(nmax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d16 = fp32_to_fp16(d);
  *m16 = fp32_to_fp16(min);
  for (int j = 0; j < kQK; ++j) {
    // + 0.5 and truncation is ggml's rounding here (x - min >= 0).
    L[j] = static_cast<uint8_t>(std::min(nmax, static_cast<int>((x[j] - min) * id + 0.5f)));
  }
}

// The weighted fit for Q4_1 / Q5_1. The format's minimum may be positive, the fit's offset not
// (a block of only positive weights is rare); the row driver keeps the reference when better.
void affine_search(const float* x, const float* qw, int nmax, uint16_t* d16, uint16_t* m16,
                   uint8_t* L) {
  float w[kQK];
  qfit::group_weights(kQK, x, qw, qfit::mean_square(kQK, x), w);
  const qfit::ScaleMinFit f = qfit::fit_scale_min(kQK, nmax, x, w, L, -0.9f, 0.05f, 36, false);
  *d16 = fp32_to_fp16(f.scale);
  *m16 = fp32_to_fp16(-f.min);
  round_affine(x, *d16, *m16, nmax, L);
}

void q4_1(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockQ4_1*>(out);
  uint8_t L[kQK];
  if (reference) {
    affine_reference(x, 15, &y->d, &y->m, L);
  } else {
    affine_search(x, qw, 15, &y->d, &y->m, L);
  }
  pack_nibbles(L, y->qs);
}

void q5_1(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockQ5_1*>(out);
  uint8_t L[kQK];
  if (reference) {
    affine_reference(x, 31, &y->d, &y->m, L);
  } else {
    affine_search(x, qw, 31, &y->d, &y->m, L);
  }
  pack_q5(L, y->qs, y->qh);
}

// ggml's reference: the value of largest magnitude at -16.
void q5_0_reference(const float* x, BlockQ5_0* y) {
  const float d = qfit::signed_absmax(kQK, x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = fp32_to_fp16(d);
  uint8_t L[kQK];
  for (int j = 0; j < kQK; ++j) {
    // ggml's +16.5 and truncation; the clamp catches +16, one past the largest code.
    L[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f))));
  }
  pack_q5(L, y->qs, y->qh);
}

void q5_0(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockQ5_0*>(out);
  if (reference) {
    q5_0_reference(x, y);
    return;
  }
  float w[kQK];
  qfit::group_weights(kQK, x, qw, qfit::mean_square(kQK, x), w);
  uint8_t L[kQK];
  y->d = fp32_to_fp16(qfit::fit_symmetric(kQK, 16, x, w, L));
  qfit::round_symmetric(kQK, x, fp16_to_fp32(y->d), 16, L);
  pack_q5(L, y->qs, y->qh);
}

// IQ4_NL: one 32-weight group; the reference weighs each value by x^2, as ggml's.
void iq4_nl(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockIQ4_NL*>(out);
  float w[kQK];
  if (reference) {
    for (int j = 0; j < kQK; ++j) w[j] = x[j] * x[j];
  } else {
    qfit::group_weights(kQK, x, qw, 2.0f * qfit::mean_square(kQK, x), w);
  }
  uint8_t L[kQK];
  y->d = fp32_to_fp16(qfit::fit_iq4(kQK, x, w, L));
  const float d = fp16_to_fp32(y->d);
  if (d != 0.0f) {
    for (int j = 0; j < kQK; ++j) L[j] = static_cast<uint8_t>(qfit::iq4_index(x[j] / d));
  }
  pack_nibbles(L, y->qs);
}
constexpr BlockCodec kQ4_1 = make_codec<q4_1>(kQK);
constexpr BlockCodec kQ5_0 = make_codec<q5_0>(kQK);
constexpr BlockCodec kQ5_1 = make_codec<q5_1>(kQK);
constexpr BlockCodec kIq4Nl = make_codec<iq4_nl>(kQK);

}  // namespace

const BlockCodec* legacy_codec(DType t) {
  switch (t) {
    case DType::Q4_1: return &kQ4_1;
    case DType::Q5_0: return &kQ5_0;
    case DType::Q5_1: return &kQ5_1;
    case DType::IQ4_NL: return &kIq4Nl;
    default: return nullptr;
  }
}

}  // namespace hearth
