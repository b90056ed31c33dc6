#include "device/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_session.h"
#include "device/cuda/session_buffers.h"
#include "core/error.h"

namespace hearth::gpu {

CudaDevice::CudaDevice(int index) : index_(index), alloc_(index) {
  check(cudaSetDevice(index), "selecting the CUDA device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "reading the CUDA device's properties");
  name_ = str_cat(prop.name, " (CUDA device ", index, ", sm_", prop.major, prop.minor, ")");
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(index_);
  model_.reset();
}

backend::MemoryInfo CudaDevice::memory() const {
  check(cudaSetDevice(index_), "selecting the CUDA device");
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "reading the CUDA device's memory");
  return backend::MemoryInfo{total, free};
}

uint64_t CudaDevice::session_scratch_bytes(const ModelConfig& config,
                                           const backend::DeviceSessionOptions& options) const {
  const ModelExtents extents = model_ ? model_->extents : extents_bound(config);
  return session_sizes(config, options, extents).scratch_bytes();
}

void CudaDevice::load(const backend::DeviceModel& model) {
  if (model_) fail("the CUDA device already holds a model");
  check(cudaSetDevice(index_), "selecting the CUDA device");
  model_ = upload_model(alloc_, model);
}

std::unique_ptr<backend::DeviceSession> CudaDevice::open_session(
    const backend::DeviceSessionOptions& options) {
  if (!model_) fail("internal: open_session() before load() on the CUDA device");
  return std::make_unique<CudaDeviceSession>(alloc_, *model_, options);
}

}  // namespace hearth::gpu
