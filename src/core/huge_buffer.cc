#include "core/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace hearth {

HugeBuffer::HugeBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  constexpr size_t kHuge = size_t{2} << 20;
  mapped_ = (bytes + kHuge - 1) / kHuge * kHuge;
  void* m = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("cannot allocate ", bytes, " bytes: ", std::strerror(errno));
  // Advice only: without transparent huge pages the buffer still works, with small pages.
  ::madvise(m, mapped_, MADV_HUGEPAGE);
  data_ = static_cast<uint8_t*>(m);
}

HugeBuffer::~HugeBuffer() {
  if (data_) ::munmap(data_, mapped_);
}

HugeBuffer::HugeBuffer(HugeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace hearth
