// The scale searches shared by the block quantizers of quantize_blocks.h: given a group of n
// values (a block or sub-block) and a weight per value, pick integer codes and a float scale (and,
// for the asymmetric types, a float minimum) for a small weighted squared error. They follow the
// searches of ggml's quantizer (make_qx_quants, make_q3_quants, make_qkx2/3_quants,
// make_qp_quants) in spirit: a handful of trial scales around the one that maps the extreme value
// to the extreme code, each refitted by least squares, the best kept. None of them is optimal;
// they are cheap, and on model weights within a fraction of a percent of the exhaustive answer.
//
// Codes are written to L as unsigned offsets (0..2 nmax - 1 for the symmetric fits, 0..nmax for
// the others) so callers pack them directly. Every function handles an all-zero (or all-tiny)
// group by returning scale 0 with codes that decode to 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hearth::qfit {

// Groups whose largest magnitude is below this are stored as zero (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupEps = 1e-15f;

// Round to nearest, ties to even (as ggml's nearest_int), saturating instead of overflowing: far
// out-of-range values (a tiny scale, inf) come back huge and are clamped by the caller. Inline
// and without a library call, so that the fits' loops over codes compile to straight code.
inline int nearest_int(float v) {
  // From 2^22 - 0.5 on every float rounds to 2^22 or beyond: saturating there turns nan into 0
  // rather than undefined behaviour. Below it, adding 1.5 * 2^23 leaves the rounded integer (ties
  // to even, the default rounding mode) in the low 22 bits of the sum's mantissa.
  if (!(std::fabs(v) < 4194303.5f)) return std::isnan(v) ? 0 : v > 0 ? 4194304 : -4194304;
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// The value of largest magnitude, with its sign (the first one on ties).
float signed_absmax(int n, const float* x);

// Symmetric codes q in [-nmax, nmax - 1] (L = q + nmax) for x ~ scale * q, the extreme value at
// -nmax. Weights w[n]; w == nullptr weighs each value by x^2 (the values that matter most for a
// dot product are the large ones). 19 trial scales; returns the least-squares scale of the best.
float fit_symmetric(int n, int nmax, const float* x, const float* w, uint8_t* L);

// As fit_symmetric with weights x^2, then up to five passes that move single codes to where the
// least-squares scale of the others wants them (ggml's reference Q3_K search).
float fit_symmetric_refine(int n, int nmax, const float* x, uint8_t* L);

// The codes nearest to x / d in [-nmax, nmax - 1] (L = q + nmax) for a scale d as stored; d = 0
// leaves L as it is (every code then decodes to 0).
void round_symmetric(int n, const float* x, float d, int nmax, uint8_t* L);

// Asymmetric codes q in [0, nmax] for x ~ scale * q - min with min >= 0 (the offset is only ever
// subtracted, so a group of positive values keeps min = 0). Trial inverse scales
// (nmax + rmin + rdelta * i) / (max - min) for i = 0..nstep, each refitted by weighted least
// squares over scale and min together; use_mad measures |error| instead of error^2 (Q2_K).
struct ScaleMinFit {
  float scale = 0.0f;
  float min = 0.0f;  // the positive offset subtracted
};
ScaleMinFit fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float rmin,
                          float rdelta, int nstep, bool use_mad);

// Non-negative values (sub-block scales or mins) to codes in [0, nmax] under weights w (not
// null), for a shared super-block scale: nine trial scales, then single-code moves as in
// fit_symmetric_refine. Returns the scale; 0 (codes 0) when every value is 0.
float fit_positive(int n, int nmax, const float* x, const float* w, uint8_t* L);

// The index of the IQ4 code book level (kIq4nlValues) nearest to v.
int iq4_index(float v);

// Weights for a group's fit in the importance-weighted searches: w_i = qw_i * sqrt(sigma2 + x_i^2)
// (qw == nullptr: qw_i = 1). As in ggml: the importance of a column scaled by a soft magnitude of
// the weight itself, sigma2 setting how much small weights still count.
void group_weights(int n, const float* x, const float* qw, float sigma2, float* w);

// sum x_i^2 / n.
float mean_square(int n, const float* x);

// An IQ4 group: 4-bit indices into kIq4nlValues for x ~ scale * kIq4nlValues[L], weights w (not
// null). Trial scales around the one that maps the extreme value to an end of the table, both
// signs (the table is not symmetric), the least-squares scale of the best returned.
float fit_iq4(int n, const float* x, const float* w, uint8_t* L);

}  // namespace hearth::qfit
