// CUDA status codes turned into hearth::Error, so that no failed call goes unnoticed and every
// message says what was being done. Internal to device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

namespace hearth::gpu {

// Throws hearth::Error "CUDA error while <what>: <CUDA's text>" when e is not cudaSuccess.
void check(cudaError_t e, const char* what);

// After a kernel launch: a bad launch configuration surfaces here rather than at the next
// unrelated call.
void check_launch(const char* kernel);

}  // namespace hearth::gpu
