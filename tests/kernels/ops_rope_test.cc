// ops/rope.h: both pair layouts against a naive rotation, n_rot < head_dim pass-through, and the
// precomputed table against the on-the-fly path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/rope.h"

namespace hearth {
namespace {

std::vector<float> random_vec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Rotation of one token in double. `ggml_theta` selects theta as ggml rounds it (float powers by
// repeated multiplication); otherwise the exact pos · base^(-2i/n_rot).
std::vector<double> rope_naive(const std::vector<float>& x, int n_head, int head_dim,
                               const RopeParams& p, int64_t pos, bool ggml_theta) {
  std::vector<double> y(x.begin(), x.end());
  const int half = p.n_rot / 2;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta_f = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const double theta =
        ggml_theta
            ? static_cast<double>(p.freq_scale * theta_f)
            : p.freq_scale * pos * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    theta_f *= theta_scale;
    const double c = std::cos(theta), s = std::sin(theta);
    for (int h = 0; h < n_head; ++h) {
      const int64_t base = static_cast<int64_t>(h) * head_dim;
      const int64_t i0 = base + (p.style == RopeStyle::Normal ? 2 * i : i);
      const int64_t i1 = base + (p.style == RopeStyle::Normal ? 2 * i + 1 : i + half);
      y[i0] = x[i0] * c - x[i1] * s;
      y[i1] = x[i0] * s + x[i1] * c;
    }
  }
  return y;
}

struct Case {
  int n_head, head_dim, n_rot;
  RopeStyle style;
  float base, scale;
};

const Case kCases[] = {
    {8, 8, 8, RopeStyle::Normal, 10000.0f, 1.0f},  // stories260K
    {4, 64, 64, RopeStyle::Normal, 10000.0f, 1.0f},
    {3, 128, 128, RopeStyle::Neox, 1000000.0f, 1.0f},
    {2, 64, 32, RopeStyle::Normal, 10000.0f, 1.0f},  // partial rotation
    {2, 80, 32, RopeStyle::Neox, 10000.0f, 0.25f},   // partial, linear scaling
    {1, 6, 2, RopeStyle::Neox, 500.0f, 1.0f},
};

TEST(OpsRope, MatchesNaiveRotation) {
  for (const Case& c : kCases) {
    const RopeParams p{c.n_rot, c.base, c.scale, c.style};
    for (int64_t pos : {0, 1, 17, 511, 4095, 100000}) {
      const auto x =
          random_vec(static_cast<int64_t>(c.n_head) * c.head_dim, static_cast<uint32_t>(pos));
      std::vector<float> y = x;
      rope(p, y.data(), 1, c.n_head, c.head_dim, pos);
      // Same theta as ggml: only cosf/sinf and the float rotation round (a few 1e-7 of |x|).
      const auto ref = rope_naive(x, c.n_head, c.head_dim, p, pos, true);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-6 * 4.0) << c.head_dim << " pos " << pos << " @" << i;
      // Against exact angles the float theta drifts by ~pos · n_rot · 6e-8 rad; check small
      // positions.
      if (pos <= 17) {
        const auto exact = rope_naive(x, c.n_head, c.head_dim, p, pos, false);
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], exact[i], 1e-4) << pos;
      }
      // Dimensions past n_rot are untouched.
      for (int h = 0; h < c.n_head; ++h) {
        for (int d = c.n_rot; d < c.head_dim; ++d) {
          ASSERT_EQ(y[h * c.head_dim + d], x[h * c.head_dim + d]);
        }
      }
    }
  }
}

TEST(OpsRope, PositionZeroIsIdentity) {
  const RopeParams p{16, 10000.0f, 1.0f, RopeStyle::Neox};
  const auto x = random_vec(3 * 16, 1);
  std::vector<float> y = x;
  rope(p, y.data(), 1, 3, 16, 0);
  EXPECT_EQ(y, x);
}

TEST(OpsRope, BatchAndTableMatchPerToken) {
  for (const Case& c : kCases) {
    const RopeParams p{c.n_rot, c.base, c.scale, c.style};
    const int64_t n_tokens = 13, pos0 = 29;
    const int64_t row = static_cast<int64_t>(c.n_head) * c.head_dim;
    const auto x = random_vec(n_tokens * row, 2);

    std::vector<float> per_token = x;
    for (int64_t t = 0; t < n_tokens; ++t)
      rope(p, per_token.data() + t * row, 1, c.n_head, c.head_dim, pos0 + t);

    std::vector<float> batch = x;
    rope(p, batch.data(), n_tokens, c.n_head, c.head_dim, pos0);
    EXPECT_EQ(batch, per_token);

    const RopeTable table(p, 64);
    std::vector<float> tabled = x;
    table.apply(tabled.data(), n_tokens, c.n_head, c.head_dim, pos0);
    EXPECT_EQ(tabled, per_token);

    // Strided rows (e.g. the Q part of a fused QKV row of 3·row floats): other columns untouched.
    std::vector<float> fused(static_cast<size_t>(n_tokens * 3 * row), 7.0f);
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::copy(x.begin() + t * row, x.begin() + (t + 1) * row, fused.begin() + t * 3 * row);
    }
    rope(p, fused.data(), n_tokens, c.n_head, c.head_dim, pos0, 3 * row);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t i = 0; i < row; ++i) ASSERT_EQ(fused[t * 3 * row + i], per_token[t * row + i]);
      for (int64_t i = row; i < 3 * row; ++i) ASSERT_EQ(fused[t * 3 * row + i], 7.0f);
    }
  }
}

TEST(OpsRope, CosSinLayout) {
  const RopeParams p{8, 10000.0f, 1.0f, RopeStyle::Normal};
  float cs[8];
  rope_cos_sin(p, 3, cs);
  const float theta_scale = std::pow(10000.0f, -2.0f / 8.0f);
  float theta = 3.0f;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(cs[2 * i], std::cos(theta));
    EXPECT_EQ(cs[2 * i + 1], std::sin(theta));
    theta *= theta_scale;
  }
}

// YaRN's ramp bounds by hand from the definition, for a Llama-2-shaped head (n_rot 128, base
// 10000, 4096 original positions): the pair whose wavelength turns beta times in n_ctx_orig is
// n_rot · ln(n_ctx_orig / (2π · beta)) / (2 ln base): 20.94 for beta 32 (floored to 20) and 45.03
// for beta 1 (ceiled to 46).
TEST(OpsRope, YarnCorrectionDimsFollowTheDefinition) {
  float low = -1, high = -1;
  yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, &low, &high);
  EXPECT_EQ(low, 20.0f);
  EXPECT_EQ(high, 46.0f);
  // Clamped to the rotated dims: a short original context puts beta 32 below pair 0.
  yarn_corr_dims(8, 64, 10000.0f, 32.0f, 1.0f, &low, &high);
  EXPECT_EQ(low, 0.0f);
  EXPECT_LE(high, 7.0f);
}

// YaRN's angles and magnitudes against a double-precision evaluation of its definition: pairs
// below the ramp keep the unscaled angle, pairs above it take the interpolated one, pairs on it
// a linear mix, and cos/sin grow by attn_factor · (1 + 0.1 ln s) for a context s times longer.
TEST(OpsRope, YarnMixesExtrapolationAndInterpolation) {
  RopeParams p{64, 10000.0f, 0.25f, RopeStyle::Neox};
  p.ext_factor = 1.0f;
  p.attn_factor = 1.5f;
  yarn_corr_dims(p.n_rot, 512, p.freq_base, 32.0f, 1.0f, &p.corr_low, &p.corr_high);
  ASSERT_LT(p.corr_low, p.corr_high);
  const double mscale = 1.5 * (1.0 + 0.1 * std::log(4.0));
  float cs[64];
  for (int64_t pos : {1, 37, 500, 1999}) {
    rope_cos_sin(p, pos, cs);
    for (int i = 0; i < p.n_rot / 2; ++i) {
      const double extrap = pos * std::pow(10000.0, -2.0 * i / p.n_rot);
      const double y = (i - p.corr_low) / std::max(0.001, double{p.corr_high} - p.corr_low);
      const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
      const double theta = 0.25 * extrap * (1.0 - ramp) + extrap * ramp;
      // theta's float rounding grows with the angle: ggml's powers by repeated multiplication.
      const double tol = 1e-5 * mscale * (1.0 + extrap);
      ASSERT_NEAR(cs[2 * i], mscale * std::cos(theta), tol) << "pos " << pos << " pair " << i;
      ASSERT_NEAR(cs[2 * i + 1], mscale * std::sin(theta), tol) << "pos " << pos << " pair " << i;
    }
  }
}

// Without YaRN, attn_factor only scales cos and sin; at 1 the angles are bit for bit the plain
// ones (every model without the key).
TEST(OpsRope, AttnFactorScalesCosAndSin) {
  RopeParams plain{16, 10000.0f, 1.0f, RopeStyle::Normal};
  RopeParams scaled = plain;
  scaled.attn_factor = 1.25f;
  float a[16], b[16];
  rope_cos_sin(plain, 123, a);
  rope_cos_sin(scaled, 123, b);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b[i], a[i] * 1.25f) << i;
}

}  // namespace
}  // namespace hearth
