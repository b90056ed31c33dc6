// Device memory of the CUDA backend. Every cudaMalloc of the backend goes through one
// DeviceAllocator, which counts the bytes exactly (Device::allocated / peak_allocated) and turns
// a failure into a hearth::Error that names what was being allocated, instead of a raw CUDA
// out-of-memory code. Buffers are RAII: an exception half-way through a load or a session's
// construction frees whatever was allocated before it. Internal to device/cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

namespace hearth::gpu {

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `bytes` of device memory for `what` (nullptr for 0 bytes). Throws hearth::Error when the
  // device cannot provide them.
  void* allocate(size_t bytes, const std::string& what);
  void release(void* p, size_t bytes) noexcept;

  uint64_t allocated() const;
  uint64_t peak() const;
  int device() const { return device_; }

 private:
  int device_;
  // Sessions on different threads allocate and free concurrently.
  mutable std::mutex mutex_;
  uint64_t allocated_ = 0;
  uint64_t peak_ = 0;
};

// Page-locked host memory: the staging area of asynchronous copies (a copy from pageable memory
// is synchronous) and of gathered weight rows at load. Host memory, so nothing is counted; the
// allocator holds no state.
class PinnedAllocator {
 public:
  void* allocate(size_t bytes, const std::string& what);
  void release(void* p, size_t bytes) noexcept;
};

// An owned allocation from an Allocator (DeviceAllocator or PinnedAllocator), which must outlive
// it.
template <typename Allocator>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator& alloc, size_t bytes, const std::string& what)
      : alloc_(&alloc), ptr_(alloc.allocate(bytes, what)), bytes_(ptr_ ? bytes : 0) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      alloc_ = std::exchange(o.alloc_, nullptr);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  void reset() noexcept {
    if (alloc_) alloc_->release(ptr_, bytes_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  Allocator* alloc_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<DeviceAllocator>;

class PinnedBuffer : public Buffer<PinnedAllocator> {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t bytes, const std::string& what) : Buffer(allocator_, bytes, what) {}

 private:
  // Stateless: one shared instance serves every buffer.
  static PinnedAllocator allocator_;
};

}  // namespace hearth::gpu
