#include "device/cuda/cuda_check.h"

#include "core/error.h"

namespace hearth::gpu {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  // Clears a non-sticky error so that the next call does not report it again.
  cudaGetLastError();
  fail("CUDA error while ", what, ": ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")");
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace hearth::gpu
