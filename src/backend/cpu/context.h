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

// Sees the input rows of every weight product the model layer makes through linear()
// (ops/linear.h): how `hearth imatrix` gathers activation statistics. The weights are named by
// their data address, which only the model layer can turn into a tensor name.
class MatmulHook {
 public:
  virtual ~MatmulHook() = default;
  // x[n, cols] is about to be multiplied by the matrix whose data starts at `weights`.
  virtual void on_matmul(const void* weights, const float* x, int64_t n, int64_t cols) = 0;
};

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

  // Not owned; null (the default) for no hook. One pointer test per product when unset.
  void set_matmul_hook(MatmulHook* hook) { matmul_hook_ = hook; }
  MatmulHook* matmul_hook() const { return matmul_hook_; }

 private:
  ThreadPool pool_;
  Kernels kernels_;
  std::vector<std::byte> scratch_;
  MatmulHook* matmul_hook_ = nullptr;
};

}  // namespace hearth::cpu
