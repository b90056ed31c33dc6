// Large, long-lived, page-aligned memory (weights made at load time, such as transposed matrices),
// advised to use transparent huge pages: sparse kernels read such memory one short row at a
// time, and with 4 KiB pages nearly every row costs a TLB miss and a page walk, enough to make a
// sparse pass cost more than the dense pass it replaces.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hearth {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  explicit HugeBuffer(size_t bytes);  // zero-filled; throws hearth::Error when out of memory
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace hearth
