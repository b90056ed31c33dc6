// RMSNorm on the device, with ggml's (and ops/norm.h's) arithmetic: products x·x rounded to float,
// summed in double, mean and 1/sqrtf(mean + eps) in float, then (x·scale)·w rounded per
// multiplication, so results match the host's scalar rms_norm up to the summation order of the
// double sum. Internal to device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hearth::gpu {

// y[n_rows, n] = rms_norm(x[n_rows, n]) · w[n] (w null: no weight). y may alias x.
void launch_rms_norm(const float* x, const float* w, float eps, int64_t n_rows, int64_t n, float* y,
                     cudaStream_t stream);

}  // namespace hearth::gpu
