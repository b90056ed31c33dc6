// Quantizers of the 256-weight super-block types: the K-quants Q2_K .. Q6_K and IQ4_XS.
//
// Each super-block is fitted in two levels, as ggml does: every sub-block (16 or 32 weights) gets
// its own float scale (and minimum) from a search of quantize_fit.h, then those floats are
// themselves quantized against one f16 super-block scale (6-bit codes, 4-bit for Q2_K, 8-bit for
// Q6_K), and finally every weight is rounded again to the sub-block scale as stored, so the
// codes are the nearest ones to what dequantization will use.
//
// The references are ggml's unweighted algorithms (sub-block weights av + |x| for Q4_K/Q5_K,
// |x| with absolute error for Q2_K, x^2 for Q3_K/Q6_K/IQ4_XS; the sub-block scales spread
// evenly from 0 or -max). The searches weigh each value by qw * sqrt(sigma2 + x^2), try more
// scales, and fit the sub-block scale codes by weighted least squares too (weights: each
// sub-block's total weight), as ggml's importance-matrix paths do.
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

float sum(int n, const float* x) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += x[i];
  return s;
}

// Codes of the sub-block values v against the stored super-block scale: nearest, clamped to
// [lo, hi]. f16 keeps only 11 bits (fewer for the subnormal scales of small weights), so the
// codes chosen against the exact scale may no longer be the nearest; for a fixed scale the
// nearest code is the best one for each value whatever the weights. When rounding shrank the
// scale so far that a value falls off the code range, the scale is stepped up instead.
float store_scale(int n, const float* v, float d, int lo, int hi, uint16_t* d16, int* codes) {
  uint16_t h = fp32_to_fp16(d);
  for (int step = 0; step < 8 && d != 0.0f; ++step) {
    const float id = 1.0f / fp16_to_fp32(h);
    bool fits = true;
    for (int i = 0; i < n; ++i) {
      const int q = nearest_int(v[i] * id);
      fits = fits && q >= lo && q <= hi;
    }
    if (fits || (h & 0x7fff) >= 0x7bff) break;
    ++h;  // one f16 step further from zero, either sign
  }
  *d16 = h;
  const float ds = fp16_to_fp32(h);
  for (int i = 0; i < n; ++i) {
    codes[i] = ds != 0.0f ? std::clamp(nearest_int(v[i] / ds), lo, hi) : 0;
  }
  return ds;
}

// Positive sub-block values (scales or mins) to codes 0..nmax against one f16 scale, returned.
// The reference spreads them evenly up to the largest one, the search fits them (weights sw).
float quantize_positive(int n, int nmax, const float* v, const float* sw, bool reference,
                        uint16_t* d16, uint8_t* L) {
  float d = 0.0f;
  if (reference) {
    for (int i = 0; i < n; ++i) d = std::max(d, v[i]);
    d /= static_cast<float>(nmax);
  } else {
    d = qfit::fit_positive(n, nmax, v, sw, L);
  }
  int codes[kQK_K / 16];
  const float ds = store_scale(n, v, d, 0, nmax, d16, codes);
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(codes[i]);
  return ds;
}

// Signed sub-block scales to codes in [-ns, ns - 1] against one f16 scale, returned. The
// reference maps the one of largest magnitude to -ns, the search fits them (weights sw).
float quantize_signed(int n, int ns, const float* v, const float* sw, bool reference,
                      uint16_t* d16, int* ls) {
  float d = 0.0f;
  if (reference) {
    const float max = qfit::signed_absmax(n, v);
    if (std::fabs(max) >= qfit::kGroupEps) d = max / -static_cast<float>(ns);
  } else {
    uint8_t L[kQK_K / 16];
    d = qfit::fit_symmetric(n, ns, v, sw, L);
  }
  return store_scale(n, v, d, -ns, ns - 1, d16, ls);
}

// --- Q4_K / Q5_K: 8 sub-blocks of 32, x ~ d * sc * q - dmin * m, sc and m 6 bits.

void pack_k4_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xf) | (lm[j] & 0xf) << 4);
      s[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// The reference's candidate scales for a 32-weight group span [nmax + rmin, nmax + rmin + span]
// in `steps` steps; the quick fit takes kQuickSteps over the same span.
constexpr int kQuickSteps = 5;

// Fits d, dmin, the packed scales and the codes L[256] (0..nmax) of a Q4_K (nmax 15) or Q5_K
// (nmax 31) super-block. quick: the reference with kQuickSteps candidate scales per group.
void fit_k4(const float* x, const float* qw, bool reference, int nmax, uint16_t* d16,
            uint16_t* dmin16, uint8_t* scales, uint8_t* L, bool quick = false) {
  float sc[8], mn[8], sw[8], w[32];
  const float sigma2 = 2.0f * qfit::mean_square(kQK_K, x);
  const float rmin = nmax == 15 ? -1.0f : -0.5f;
  const int steps = nmax == 15 ? 20 : 15, fit_steps = quick ? kQuickSteps : steps;
  const float rdelta = quick ? 0.1f * static_cast<float>(steps) / kQuickSteps : 0.1f;
  for (int j = 0; j < 8; ++j) {
    const float* xb = x + 32 * j;
    qfit::ScaleMinFit f;
    if (reference) {
      const float av = std::sqrt(qfit::mean_square(32, xb));
      for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(xb[l]);
      f = qfit::fit_scale_min(32, nmax, xb, w, L + 32 * j, rmin, rdelta, fit_steps, false);
    } else {
      qfit::group_weights(32, xb, qw ? qw + 32 * j : nullptr, sigma2, w);
      f = qfit::fit_scale_min(32, nmax, xb, w, L + 32 * j, -0.9f, 0.05f, 36, false);
    }
    sc[j] = f.scale;
    mn[j] = f.min;
    sw[j] = sum(32, w);
  }
  uint8_t ls[8], lm[8];
  const float d = quantize_positive(8, 63, sc, sw, reference, d16, ls);
  const float dmin = quantize_positive(8, 63, mn, sw, reference, dmin16, lm);
  pack_k4_scales(ls, lm, scales);
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = k4_scale_min(scales, j);
    const float dl = d * static_cast<float>(sm.scale);
    if (dl == 0.0f) continue;
    const float ml = dmin * static_cast<float>(sm.min);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + ml) / dl), 0, nmax));
    }
  }
}

// Weights 64i + l (l < 32) in the low nibbles of qs[32i + l], 64i + 32 + l in the high ones.
void pack_k4_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int i = 0; i < kQK_K / 64; ++i) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * i + l] = static_cast<uint8_t>((L[64 * i + l] & 0xf) | (L[64 * i + 32 + l] & 0xf) << 4);
    }
  }
}

// A Q4_K block by fit_k4 (quick: its fewer candidate scales).
void q4_k_block(const float* x, const float* qw, bool reference, bool quick, void* out) {
  auto* y = static_cast<BlockQ4_K*>(out);
  uint8_t L[kQK_K];
  fit_k4(x, qw, reference, 15, &y->d, &y->dmin, y->scales, L, quick);
  pack_k4_nibbles(L, y->qs);
}

void q4_k(const float* x, const float* qw, bool reference, void* out) {
  q4_k_block(x, qw, reference, false, out);
}

// A Q5_K block by fit_k4 (quick: its fewer candidate scales): the codes' low nibbles as Q4_K's,
// their fifth bits in qh.
void q5_k_block(const float* x, const float* qw, bool reference, bool quick, void* out) {
  auto* y = static_cast<BlockQ5_K*>(out);
  uint8_t L[kQK_K];
  fit_k4(x, qw, reference, 31, &y->d, &y->dmin, y->scales, L, quick);
  pack_k4_nibbles(L, y->qs);
  std::memset(y->qh, 0, sizeof y->qh);
  for (int i = 0; i < kQK_K; ++i) y->qh[i % 32] |= static_cast<uint8_t>((L[i] >> 4) << (i / 32));
}

void q5_k(const float* x, const float* qw, bool reference, void* out) {
  q5_k_block(x, qw, reference, false, out);
}

// --- Q2_K: 16 sub-blocks of 16, x ~ d * sc * q - dmin * m, q 2 bits, sc and m 4 bits.

// Weight 128h + 32k + l (k < 4, l < 32) at bits 2k of qs[32h + l].
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 4);
  for (int i = 0; i < kQK_K; ++i) {
    qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((L[i] & 3) << (2 * ((i % 128) / 32)));
  }
}

void q2_k(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockQ2_K*>(out);
  uint8_t L[kQK_K];
  float sc[16], mn[16], sw[16], w[16];
  const float sigma2 = qfit::mean_square(kQK_K, x);
  for (int j = 0; j < 16; ++j) {
    const float* xb = x + 16 * j;
    qfit::ScaleMinFit f;
    if (reference) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(xb[l]);
      f = qfit::fit_scale_min(16, 3, xb, w, L + 16 * j, -0.5f, 0.1f, 15, true);
    } else {
      qfit::group_weights(16, xb, qw ? qw + 16 * j : nullptr, sigma2, w);
      f = qfit::fit_scale_min(16, 3, xb, w, L + 16 * j, -0.9f, 0.05f, 36, false);
    }
    sc[j] = f.scale;
    mn[j] = f.min;
    sw[j] = sum(16, w);
  }
  uint8_t ls[16], lm[16];
  const float d = quantize_positive(16, 15, sc, sw, reference, &y->d, ls);
  const float dmin = quantize_positive(16, 15, mn, sw, reference, &y->dmin, lm);
  for (int j = 0; j < 16; ++j) {
    y->scales[j] = static_cast<uint8_t>(ls[j] | lm[j] << 4);
    const float dl = d * static_cast<float>(ls[j]);
    if (dl == 0.0f) continue;
    const float ml = dmin * static_cast<float>(lm[j]);
    for (int l = 0; l < 16; ++l) {
      L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + l] + ml) / dl), 0, 3));
    }
  }
  pack_2bit(L, y->qs);
}

// --- Q3_K and Q6_K: 16 sub-blocks of 16, x ~ d * sc * q, q in [-nq, nq - 1], sc in [-ns, ns - 1].

// Fits the codes L[256] (q + nq) and the sub-block scale codes ls[16]; returns d as stored.
float fit_symmetric_k(const float* x, const float* qw, bool reference, int nq, int ns, int* ls,
                      uint16_t* d16, uint8_t* L) {
  float sc[16], sw[16], w[16];
  const float sigma2 = 2.0f * qfit::mean_square(kQK_K, x);
  for (int j = 0; j < 16; ++j) {
    const float* xb = x + 16 * j;
    if (reference) {
      // ggml's Q3_K reference refines single codes; its Q6_K one tries 19 scales.
      sc[j] = nq == 4 ? qfit::fit_symmetric_refine(16, nq, xb, L + 16 * j)
                      : qfit::fit_symmetric(16, nq, xb, nullptr, L + 16 * j);
      sw[j] = 1.0f;
    } else {
      qfit::group_weights(16, xb, qw ? qw + 16 * j : nullptr, sigma2, w);
      sc[j] = qfit::fit_symmetric(16, nq, xb, w, L + 16 * j);
      sw[j] = sum(16, w);
    }
  }
  const float d = quantize_signed(16, ns, sc, sw, reference, d16, ls);
  for (int j = 0; j < 16; ++j) {
    qfit::round_symmetric(16, x + 16 * j, d * static_cast<float>(ls[j]), nq, L + 16 * j);
  }
  return d;
}

void q3_k(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockQ3_K*>(out);
  uint8_t L[kQK_K];
  int ls[16];
  fit_symmetric_k(x, qw, reference, 4, 32, ls, &y->d, L);
  // Scale j + 32 (6 bits): low nibble in byte j % 8 (high nibble for j >= 8), top two bits at
  // bits 2 (j / 4) of byte 8 + j % 4.
  std::memset(y->scales, 0, sizeof y->scales);
  for (int j = 0; j < 16; ++j) {
    const int l = ls[j] + 32;
    y->scales[j % 8] |= static_cast<uint8_t>((l & 0xf) << (j < 8 ? 0 : 4));
    y->scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
  // L = q + 4 in 0..7: bit 2 goes to hmask (set means q >= 0), the low two bits to qs.
  std::memset(y->hmask, 0, sizeof y->hmask);
  for (int i = 0; i < kQK_K; ++i) y->hmask[i % 32] |= static_cast<uint8_t>((L[i] >> 2) << (i / 32));
  pack_2bit(L, y->qs);
}

void q6_k(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockQ6_K*>(out);
  uint8_t L[kQK_K];
  int ls[16];
  fit_symmetric_k(x, qw, reference, 32, 128, ls, &y->d, L);
  for (int j = 0; j < 16; ++j) y->scales[j] = static_cast<int8_t>(ls[j]);
  // In each half h: weight 128h + 32k + l has its low nibble in ql[64h + l + 32 (k & 1)] (high
  // nibble for k >= 2) and its top two bits at bits 2k of qh[32h + l].
  std::memset(y->ql, 0, sizeof y->ql);
  std::memset(y->qh, 0, sizeof y->qh);
  for (int i = 0; i < kQK_K; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    y->ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((L[i] & 0xf) << (k < 2 ? 0 : 4));
    y->qh[32 * h + l] |= static_cast<uint8_t>((L[i] >> 4) << (2 * k));
  }
}

// --- IQ4_XS: 8 sub-blocks of 32, x ~ d * (ls - 32) * kIq4nlValues[L], ls 6 bits.

void iq4_xs(const float* x, const float* qw, bool reference, void* out) {
  auto* y = static_cast<BlockIQ4_XS*>(out);
  uint8_t L[kQK_K];
  float sc[8], sw[8], w[32];
  const float sigma2 = 2.0f * qfit::mean_square(kQK_K, x);
  for (int j = 0; j < 8; ++j) {
    const float* xb = x + 32 * j;
    if (reference) {
      for (int l = 0; l < 32; ++l) w[l] = xb[l] * xb[l];
    } else {
      qfit::group_weights(32, xb, qw ? qw + 32 * j : nullptr, sigma2, w);
    }
    sc[j] = qfit::fit_iq4(32, xb, w, L + 32 * j);
    sw[j] = sum(32, w);
  }
  int ls[8];
  const float d = quantize_signed(8, 32, sc, sw, reference, &y->d, ls);
  y->scales_h = 0;
  std::memset(y->scales_l, 0, sizeof y->scales_l);
  for (int j = 0; j < 8; ++j) {
    const int l = ls[j] + 32;
    y->scales_l[j / 2] |= static_cast<uint8_t>((l & 0xf) << (4 * (j & 1)));
    y->scales_h |= static_cast<uint16_t>((l >> 4) << (2 * j));
    const float dl = d * static_cast<float>(ls[j]);
    if (dl != 0.0f) {
      for (int i = 0; i < 32; ++i) L[32 * j + i] = static_cast<uint8_t>(qfit::iq4_index(x[32 * j + i] / dl));
    }
    for (int i = 0; i < 16; ++i) {
      y->qs[16 * j + i] = static_cast<uint8_t>((L[32 * j + i] & 0xf) | (L[32 * j + 16 + i] & 0xf) << 4);
    }
  }
}

// The reference's fits with fewer candidate scales, for blocks made at load.
void q4_k_quick(const float* x, void* out) { q4_k_block(x, nullptr, true, true, out); }
void q5_k_quick(const float* x, void* out) { q5_k_block(x, nullptr, true, true, out); }

constexpr BlockCodec kQ2_K = make_codec<q2_k>(kQK_K);
constexpr BlockCodec kQ3_K = make_codec<q3_k>(kQK_K);
constexpr BlockCodec kQ4_K = make_codec<q4_k>(kQK_K, q4_k_quick);
constexpr BlockCodec kQ5_K = make_codec<q5_k>(kQK_K, q5_k_quick);
constexpr BlockCodec kQ6_K = make_codec<q6_k>(kQK_K);
constexpr BlockCodec kIq4Xs = make_codec<iq4_xs>(kQK_K);

}  // namespace

const BlockCodec* kquant_codec(DType t) {
  switch (t) {
    case DType::Q2_K: return &kQ2_K;
    case DType::Q3_K: return &kQ3_K;
    case DType::Q4_K: return &kQ4_K;
    case DType::Q5_K: return &kQ5_K;
    case DType::Q6_K: return &kQ6_K;
    case DType::IQ4_XS: return &kIq4Xs;
    default: return nullptr;
  }
}

}  // namespace hearth
