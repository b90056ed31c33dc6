// 64-byte aligned storage for activations, caches and workspaces (SIMD loads, cache lines).
#pragma once

#include <cstddef>
#include <memory>

namespace hearth {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);  // throws std::bad_alloc
  void* data() const { return ptr_.get(); }
  float* f32() const { return static_cast<float*>(ptr_.get()); }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

}  // namespace hearth
