// The element-wise steps of the hot FFN: activations, the modes' masks and the GLU product, on
// [n, ld] float arrays (token t's row at t · ld). Activations are those of ops/activation.h's
// scalar references (silu x / (1 + e^-x), relu, relu², gelu's tanh form with the same constants);
// expf/tanhf may differ from the host's std::exp/std::tanh in the last bit. Columns of a compact
// array are the active list's positions jj, whose hot neuron is idx[jj]; full arrays are indexed
// by hot neuron. Internal to device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hearth/types.h"

namespace hearth::gpu {

// y[n] = act(x[n]); y may alias x.
void launch_activate(FfnActivation act, const float* x, int64_t n, float* y, cudaStream_t stream);

// Oracle / Threshold on the full activations: f[t, j] = act(f[t, j]) for j < k, then zeroed
// unless it fires: |f| > threshold when threshold > 0, f != 0 otherwise (the host's rule:
// mask_below only above 0, then `!= 0`).
void launch_act_mask(FfnActivation act, float threshold, float* f, int64_t n, int64_t k, int64_t ld,
                     cudaStream_t stream);

// Predictor: score[t, j] = score >= threshold ? 1 : 0 for j < k.
void launch_score_mask(float threshold, float* score, int64_t n, int64_t k, int64_t ld,
                       cudaStream_t stream);

// The activations of the active neurons, compact: for t < n, jj < *count,
//   u' = up_relu ? relu(u) : u   (dReLU; only with a gate)
//   a  = g ? act(g[t, jj]) · u'[t, jj] : act(u[t, jj])         (written over u)
// then, with a mask (full, [n, ld]), a = 0 where mask[t, idx[jj]] == 0. g may be null.
struct GluArgs {
  FfnActivation act = FfnActivation::Silu;
  bool up_relu = false;
  const float* g = nullptr;     // [n, ld] compact, or null (ungated)
  float* u = nullptr;           // [n, ld] compact: up in, activations out
  const float* mask = nullptr;  // [n, ld] full, or null
  const int32_t* idx = nullptr;
  const int32_t* count_dev = nullptr;
  int64_t max_count = 0;
  int64_t n = 0;
  int64_t ld = 0;
};
void launch_glu(const GluArgs& a, cudaStream_t stream);

// Oracle / Threshold, compact: a[t, jj] = u ? u'[t, jj] · f[t, idx[jj]] : f[t, idx[jj]] for
// jj < *count, with u' as in GluArgs and f the masked full activations (launch_act_mask). a may
// be u.
void launch_oracle_combine(bool up_relu, const float* u, const float* f, const int32_t* idx,
                           const int32_t* count_dev, int64_t max_count, int64_t n, int64_t ld,
                           float* a, cudaStream_t stream);

// Two-stage Threshold: a[t, jj] = |a| > threshold ? a : 0 for jj < *count.
void launch_abs_mask(float threshold, float* a, const int32_t* count_dev, int64_t max_count,
                     int64_t n, int64_t ld, cudaStream_t stream);

}  // namespace hearth::gpu
