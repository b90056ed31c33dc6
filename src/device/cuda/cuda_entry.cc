// device/cuda_entry.h for builds with CUDA.
#include "device/cuda_entry.h"

#include <cuda_runtime_api.h>

#include "device/cuda/cuda_device.h"
#include "core/error.h"

namespace hearth::backend {

int cuda_device_count() {
  int n = 0;
  // Without a driver or a GPU this reports an error (cudaErrorNoDevice,
  // cudaErrorInsufficientDriver, ...): that is simply no GPU.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Device> make_cuda_device(int device_index) {
  const int n = cuda_device_count();
  if (n == 0) fail("no CUDA GPU is available (no device, or no CUDA driver)");
  if (device_index < 0 || device_index >= n) {
    fail("CUDA device ", device_index, " does not exist (this machine has ", n, ")");
  }
  return std::make_unique<gpu::CudaDevice>(device_index);
}

}  // namespace hearth::backend
