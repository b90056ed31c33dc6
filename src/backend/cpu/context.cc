#include "backend/cpu/context.h"

#include <cstdint>

namespace hearth::cpu {
namespace {
constexpr size_t kScratchAlign = 64;
}

CpuContext::CpuContext(int n_threads, Isa isa) : pool_(n_threads), kernels_(select_kernels(isa)) {}

void* CpuContext::scratch(size_t bytes) {
  // The vector's own storage is only 16-byte aligned; over-allocate and align the start.
  if (scratch_.size() < bytes + kScratchAlign) scratch_.resize(bytes + kScratchAlign);
  const auto addr = reinterpret_cast<uintptr_t>(scratch_.data());
  const uintptr_t aligned = (addr + kScratchAlign - 1) & ~(kScratchAlign - 1);
  return scratch_.data() + (aligned - addr);
}

}  // namespace hearth::cpu
