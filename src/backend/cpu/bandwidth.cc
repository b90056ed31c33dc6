#include "backend/cpu/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>

#include "core/error.h"

namespace hearth::cpu {
namespace {

constexpr float kScalar = 3.0f;
constexpr float kInitA = 0.0f, kInitB = 1.0f, kInitC = 2.0f;
constexpr size_t kAlignment = 64;  // cache line, so no thread's range shares a line at its start

struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
};
using FloatBuffer = std::unique_ptr<float[], AlignedDelete>;

// Deliberately left uninitialized: the pages must be touched first by the threads that stream
// them, not by the allocating thread.
FloatBuffer allocate_untouched(size_t n) {
  try {
    return FloatBuffer(
        static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{kAlignment})));
  } catch (const std::bad_alloc&) {
    fail("bandwidth: cannot allocate 3 arrays of ", n * sizeof(float), " bytes");
  }
}

}  // namespace

double measure_bandwidth_gbs(ThreadPool& pool, size_t bytes_per_array, int reps) {
  const size_t n = bytes_per_array / sizeof(float);
  const int nth = pool.size();
  if (reps < 1) fail("bandwidth: reps must be >= 1, got ", reps);
  if (n < static_cast<size_t>(nth)) {
    fail("bandwidth: ", bytes_per_array, " bytes per array is too small for ", nth, " threads");
  }
  if (n > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
    fail("bandwidth: ", bytes_per_array, " bytes per array is too large");
  }
  FloatBuffer a_buf = allocate_untouched(n), b_buf = allocate_untouched(n),
              c_buf = allocate_untouched(n);
  float* __restrict a = a_buf.get();
  float* __restrict b = b_buf.get();
  float* __restrict c = c_buf.get();
  const auto count = static_cast<int64_t>(n);

  pool.run([&](int ith, int nth_run) {
    const auto [begin, end] = split_range(count, ith, nth_run);
    for (int64_t i = begin; i < end; ++i) {
      a[i] = kInitA;
      b[i] = kInitB;
      c[i] = kInitC;
    }
  });

  auto triad = [&](int ith, int nth_run) {
    const auto [begin, end] = split_range(count, ith, nth_run);
    for (int64_t i = begin; i < end; ++i) a[i] = b[i] + kScalar * c[i];
  };
  double best_seconds = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.run(triad);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best_seconds = std::min(best_seconds, elapsed.count());
  }

  // Reading the result back keeps the compiler from dropping the stores and catches a thread
  // that skipped its range.
  const float expected = kInitB + kScalar * kInitC;
  for (int ith = 0; ith < nth; ++ith) {
    const auto [begin, end] = split_range(count, ith, nth);
    if (a[begin] != expected || a[end - 1] != expected) {
      fail("bandwidth: triad result is wrong in thread ", ith, "'s range");
    }
  }
  const double bytes_moved = 3.0 * static_cast<double>(n * sizeof(float));
  return bytes_moved / std::max(best_seconds, 1e-9) / 1e9;
}

}  // namespace hearth::cpu
