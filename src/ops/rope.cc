#include "ops/rope.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace hearth {

namespace {

// Where pair `pair` sits on YaRN's ramp: 1 below low (extrapolate), 0 above high (interpolate).
float yarn_ramp(float low, float high, int pair) {
  const float y = (static_cast<float>(pair) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

// The rotated dim pair whose wavelength makes `turns` full turns in n_ctx_orig positions.
float yarn_corr_dim(int n_rot, int64_t n_ctx_orig, float turns, float freq_base) {
  constexpr float pi = std::numbers::pi_v<float>;
  return static_cast<float>(n_rot) *
         std::log(static_cast<float>(n_ctx_orig) / (turns * 2.0f * pi)) /
         (2.0f * std::log(freq_base));
}

}  // namespace

void yarn_corr_dims(int n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                    float beta_slow, float* low, float* high) {
  const float start = std::floor(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
  *low = std::max(0.0f, start);
  *high = std::min(static_cast<float>(n_rot - 1), end);
}

void rope_cos_sin(const RopeParams& params, int64_t pos, float* cs) {
  assert(params.n_rot > 0 && params.n_rot % 2 == 0 && params.n_rot <= kMaxRopeDims);
  const float theta_scale = std::pow(params.freq_base, -2.0f / static_cast<float>(params.n_rot));
  // The power is accumulated by multiplication rather than recomputed per pair: that is how ggml
  // rounds it, and the last bits of theta matter at large positions.
  float theta = static_cast<float>(pos);
  const bool factors = !params.freq_factors.empty();
  assert(!factors || params.freq_factors.size() == static_cast<size_t>(params.n_rot / 2));
  float mscale = params.attn_factor;
  if (params.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / params.freq_scale);
  for (int i = 0; i < params.n_rot; i += 2) {
    const float extrap = factors ? theta / params.freq_factors[i / 2] : theta;
    float t = params.freq_scale * extrap;
    if (params.ext_factor != 0.0f) {
      const float mix = yarn_ramp(params.corr_low, params.corr_high, i / 2) * params.ext_factor;
      t = t * (1.0f - mix) + extrap * mix;
    }
    cs[i] = std::cos(t) * mscale;
    cs[i + 1] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

void rope_apply(const float* cs, int n_rot, RopeStyle style, float* x, int n_head, int head_dim,
                int64_t head_stride) {
  assert(n_rot <= head_dim && n_rot % 2 == 0);
  const int half = n_rot / 2;
  for (int h = 0; h < n_head; ++h) {
    float* v = x + h * head_stride;
    if (style == RopeStyle::Normal) {
      for (int i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

void rope(const RopeParams& params, float* x, int64_t n_tokens, int n_head, int head_dim,
          int64_t pos0, int64_t token_stride) {
  if (token_stride == 0) token_stride = static_cast<int64_t>(n_head) * head_dim;
  float cs[kMaxRopeDims];
  for (int64_t t = 0; t < n_tokens; ++t) {
    rope_cos_sin(params, pos0 + t, cs);
    rope_apply(cs, params.n_rot, params.style, x + t * token_stride, n_head, head_dim, head_dim);
  }
}

RopeTable::RopeTable(const RopeParams& params, int64_t n_ctx)
    : params_(params), n_ctx_(n_ctx), table_(static_cast<size_t>(n_ctx * params.n_rot)) {
  for (int64_t p = 0; p < n_ctx; ++p) rope_cos_sin(params_, p, table_.data() + p * params_.n_rot);
}

void RopeTable::apply(float* x, int64_t n_tokens, int n_head, int head_dim, int64_t pos0,
                      int64_t token_stride) const {
  assert(pos0 >= 0 && pos0 + n_tokens <= n_ctx_);
  if (token_stride == 0) token_stride = static_cast<int64_t>(n_head) * head_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    rope_apply(cos_sin(pos0 + t), params_.n_rot, params_.style, x + t * token_stride, n_head,
               head_dim, head_dim);
  }
}

}  // namespace hearth
