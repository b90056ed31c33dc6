// The CPU backend as the ops see it: a thread pool, the kernel table chosen once for this machine's
// ISA, and a grow-only scratch arena (sized on the first token, then reused, so the decode loop
// never allocates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/thread_pool.h"

namespace hearth::cpu {

class CpuContext {
 public:
  explicit CpuContext(int n_threads, Isa isa = detect_isa());

  ThreadPool& pool() { return pool_; }
  int n_threads() const { return pool_.size(); }
  const Kernels& kernels() const { return kernels_; }
  Isa isa() const { return kernels_.isa; }

  // Returns at least `bytes` bytes of 64-byte aligned scratch, valid until the next call.
  // Grows only; callers that must not allocate reserve the size up front.
  void* scratch(size_t bytes);

 private:
  ThreadPool pool_;
  Kernels kernels_;
  std::vector<std::byte> scratch_;
};

}  // namespace hearth::cpu
