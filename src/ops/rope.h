// Rotary position embedding (RoPE), computed the way ggml_rope does so that results match
// llama.cpp: theta_i = p · theta_scale^i with theta_scale = powf(freq_base, -2/n_rot) and the power
// built by repeated float multiplication, then cosf/sinf of freq_scale · theta_i (or YaRN's mix,
// see RopeParams).
//
// Two pair layouts exist:
//   Normal (llama, llama2.c exports):  (x[2i], x[2i+1]) rotated by theta_i
//   Neox   (gpt-neox, falcon, qwen):   (x[i], x[i + n_rot/2]) rotated by theta_i
// for i < n_rot/2; elements from n_rot to head_dim pass through unchanged.
//
// Per-token cost is n_rot/2 cosf/sinf pairs shared by all heads; RopeTable precomputes them for
// every position of a context when that cost matters (long prompts re-use nothing otherwise).
#pragma once

#include <cstdint>
#include <vector>

namespace hearth {

enum class RopeStyle { Normal, Neox };

struct RopeParams {
  int n_rot = 0;               // rotated dims per head (rope.dimension_count), even, <= head_dim
  float freq_base = 10000.0f;  // rope.freq_base
  float freq_scale = 1.0f;     // 1 / rope.scaling.factor for linear or YaRN scaling, else 1
  RopeStyle style = RopeStyle::Normal;
  // [n_rot/2] per-frequency divisors (Llama 3.1's rope_freqs, Phi-3's LongRoPE factors:
  // theta_i / factor_i), or empty.
  std::vector<float> freq_factors = {};
  // YaRN (Peng et al., 2023): pair i keeps its unscaled angle (extrapolation) where it turns
  // many times within the original context, takes the interpolated one (freq_scale ·) where it
  // turns less than once, and a linear ramp in between, mixed by ext_factor (0: interpolation
  // only, as linear scaling). The ramp runs over pair indices [corr_low, corr_high]
  // (yarn_corr_dims). With ext_factor != 0, cos and sin also grow by 1 + 0.1 · ln(1/freq_scale).
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
  // cos and sin are multiplied by this (rope.scaling.attn_factor; Phi-3's LongRoPE scale), so
  // q · k grows by its square.
  float attn_factor = 1.0f;
};

// YaRN's ramp bounds for n_rot rotated dims of a model trained on n_ctx_orig positions: the pair
// indices whose wavelength fits beta_fast and beta_slow turns into n_ctx_orig, rounded outwards
// and clamped to [0, n_rot - 1], as ggml computes them.
void yarn_corr_dims(int n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                    float beta_slow, float* low, float* high);

// Largest n_rot accepted (rope() keeps one position's cos/sin on the stack).
inline constexpr int kMaxRopeDims = 1024;

// cs[n_rot] = (cos θ_0, sin θ_0, cos θ_1, sin θ_1, ...) for position pos.
void rope_cos_sin(const RopeParams& params, int64_t pos, float* cs);

// Rotates every head of one token: x[n_head, head_dim] in place, with cs[n_rot] from rope_cos_sin.
// Heads are head_stride elements apart (head_dim when contiguous).
void rope_apply(const float* cs, int n_rot, RopeStyle style, float* x, int n_head, int head_dim,
                int64_t head_stride);

// Rotates x[n_tokens, n_head, head_dim] in place; token t is at position pos0 + t. Tokens are
// token_stride elements apart (0 means n_head · head_dim, i.e. contiguous).
void rope(const RopeParams& params, float* x, int64_t n_tokens, int n_head, int head_dim,
          int64_t pos0, int64_t token_stride = 0);

// cos/sin for positions [0, n_ctx), built once per session: n_ctx · n_rot floats.
class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(const RopeParams& params, int64_t n_ctx);

  const RopeParams& params() const { return params_; }
  int64_t n_ctx() const { return n_ctx_; }

  // cs[n_rot] for position pos (0 <= pos < n_ctx), the layout of rope_cos_sin.
  const float* cos_sin(int64_t pos) const { return table_.data() + pos * params_.n_rot; }

  // Same contract as rope(); positions pos0 .. pos0 + n_tokens - 1 must be < n_ctx.
  void apply(float* x, int64_t n_tokens, int n_head, int head_dim, int64_t pos0,
             int64_t token_stride = 0) const;

 private:
  RopeParams params_;
  int64_t n_ctx_ = 0;
  std::vector<float> table_;  // [n_ctx, n_rot]
};

}  // namespace hearth
