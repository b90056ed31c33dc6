#include "device/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace hearth::gpu {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

PinnedAllocator PinnedBuffer::allocator_;

void* DeviceAllocator::allocate(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    fail("CUDA device ", device_, " cannot allocate ", what, ": ", bytes / kMiB, " MiB requested, ",
         allocated() / kMiB, " MiB held by Hearth, ", free / kMiB, " MiB free of ", total / kMiB,
         " MiB (", cudaGetErrorString(e), ")");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  allocated_ += bytes;
  if (allocated_ > peak_) peak_ = allocated_;
  return p;
}

void DeviceAllocator::release(void* p, size_t bytes) noexcept {
  if (!p) return;
  cudaFree(p);
  std::lock_guard<std::mutex> lock(mutex_);
  allocated_ -= bytes;
}

uint64_t DeviceAllocator::allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

uint64_t DeviceAllocator::peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

void* PinnedAllocator::allocate(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cannot allocate ", bytes / kMiB, " MiB of page-locked host memory for ", what, " (",
         cudaGetErrorString(e), ")");
  }
  return p;
}

void PinnedAllocator::release(void* p, size_t /*bytes*/) noexcept {
  if (p) cudaFreeHost(p);
}

}  // namespace hearth::gpu
