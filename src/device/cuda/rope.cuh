// Rotary position embedding on the device. The cos/sin table is the host's RopeTable
// (ops/rope.h), uploaded once per session, so the angles are bit-identical to the CPU's; the
// rotation itself rounds each product and sum on its own (no FMA contraction), as the host's
// scalar rope_apply does, so results match it exactly. Internal to device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hearth::gpu {

// Rotates x[n_tokens, n_head, head_dim] in place (tokens token_stride floats apart); token t is at
// position pos0 + t and uses table[(pos0 + t) * n_rot ..] = (cos θ_0, sin θ_0, cos θ_1, ...).
// neox false: pairs (2i, 2i + 1); true: (i, i + n_rot / 2); dims from n_rot on are untouched.
void launch_rope(float* x, int64_t n_tokens, int n_head, int head_dim, int64_t token_stride,
                 const float* table, int n_rot, bool neox, int64_t pos0, cudaStream_t stream);

}  // namespace hearth::gpu
