#include "core/aligned_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace hearth {

AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  ptr_.reset(p);
}

void AlignedBuffer::Free::operator()(void* p) const { std::free(p); }

}  // namespace hearth
