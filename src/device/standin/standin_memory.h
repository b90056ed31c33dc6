// The stand-in device's memory: host allocations charged against a fixed capacity, so that a
// placement that would overrun a real GPU's memory fails here the same way (with a clear error,
// never an out-of-memory crash), and tests can check the peak against the budget.
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/weight_views.h"

namespace hearth::backend {

class StandinMemory {
 public:
  explicit StandinMemory(uint64_t capacity) : capacity_(capacity) {}

  uint64_t capacity() const { return capacity_; }
  uint64_t allocated() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_;
  }
  uint64_t peak() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

  // Charges `bytes` (throws hearth::Error naming `what` when they do not fit) and releases them
  // when the returned block goes away.
  class Block {
   public:
    Block() = default;
    Block(StandinMemory* owner, uint64_t bytes) : owner_(owner), buf_(bytes), bytes_(bytes) {}
    Block(Block&& o) noexcept { *this = std::move(o); }
    Block& operator=(Block&& o) noexcept {
      release();
      owner_ = o.owner_;
      buf_ = std::move(o.buf_);
      bytes_ = o.bytes_;
      o.owner_ = nullptr;
      o.bytes_ = 0;
      return *this;
    }
    ~Block() { release(); }
    void* data() const { return buf_.data(); }
    float* f32() const { return buf_.f32(); }
    uint64_t bytes() const { return bytes_; }

   private:
    void release() {
      if (owner_) owner_->release(bytes_);
      owner_ = nullptr;
    }
    StandinMemory* owner_ = nullptr;
    AlignedBuffer buf_;
    uint64_t bytes_ = 0;
  };

  Block alloc(uint64_t bytes, const char* what) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (bytes > capacity_ - allocated_) {
        fail("device (stand-in): cannot allocate ", bytes, " bytes for ", what, ": ", allocated_,
             " of ", capacity_, " bytes are in use");
      }
      allocated_ += bytes;
      if (allocated_ > peak_) peak_ = allocated_;
    }
    try {
      return Block(this, bytes);
    } catch (...) {
      release(bytes);
      throw;
    }
  }

 private:
  void release(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    allocated_ -= bytes;
  }

  const uint64_t capacity_;
  mutable std::mutex mu_;
  uint64_t allocated_ = 0;
  uint64_t peak_ = 0;
};

// A copy of rows `ids` of m (all rows when ids is null) in device memory, and the Matrix view of
// it; one copy per matrix (rows gathered on the way).
struct DeviceMatrix {
  StandinMemory::Block block;
  Matrix view;
};

inline DeviceMatrix copy_rows(StandinMemory& mem, const Matrix& m, const int32_t* ids, int64_t k,
                              const char* what) {
  DeviceMatrix d;
  const int64_t rows = ids ? k : m.rows;
  const uint64_t rb = row_bytes(m.type, m.cols);
  d.block = mem.alloc(rb * static_cast<uint64_t>(rows), what);
  auto* dst = static_cast<uint8_t*>(d.block.data());
  if (ids) {
    for (int64_t j = 0; j < k; ++j) std::memcpy(dst + j * rb, m.row(ids[j]), rb);
  } else {
    std::memcpy(dst, m.data, rb * static_cast<uint64_t>(rows));
  }
  d.view = Matrix{m.type, d.block.data(), rows, m.cols};
  return d;
}

}  // namespace hearth::backend
