// Shared set-up for the micro-benchmarks: weight matrices big enough to defeat the caches.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/huge_buffer.h"
#include "core/quantize.h"

namespace hearth::bench {

// Copies of one random [rows, cols] weight matrix, at least `min_total_bytes` together, so that
// cycling through them streams from DRAM as decode does (one matrix alone may fit in L3).
// Copies in transparent-huge-page memory, as the model's weights are held (read into memory, or
// the copies made at load): with 4 KiB pages every scattered row of a sparse kernel would also
// pay a TLB miss that decoding does not.
struct WeightSet {
  std::vector<HugeBuffer> copies;
  size_t matrix_bytes = 0;

  WeightSet(DType t, int64_t rows, int64_t cols, size_t min_total_bytes) {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::vector<float> f(static_cast<size_t>(rows * cols));
    for (auto& v : f) v = normal(rng);
    matrix_bytes = static_cast<size_t>(rows * row_bytes(t, cols));
    std::vector<uint8_t> first(matrix_bytes);
    quantize_rows(t, f.data(), first.data(), rows, cols);
    const size_t n = (min_total_bytes + matrix_bytes - 1) / matrix_bytes;
    for (size_t i = 0; i < (n < 1 ? 1 : n); ++i) {
      std::memcpy(copies.emplace_back(matrix_bytes).data(), first.data(), matrix_bytes);
    }
  }
  const uint8_t* get(size_t i) const { return copies[i % copies.size()].data(); }
};

inline std::vector<float> random_activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

// The WeightSet for these arguments. Keeps only the last set (consecutive benchmarks share it),
// so memory stays at one set.
inline const WeightSet& cached_weights(DType t, int64_t rows, int64_t cols, size_t min_bytes) {
  using Key = std::tuple<DType, int64_t, int64_t, size_t>;
  static Key key;
  static std::unique_ptr<WeightSet> set;
  const Key wanted{t, rows, cols, min_bytes};
  if (!set || key != wanted) {
    set.reset();
    set = std::make_unique<WeightSet>(t, rows, cols, min_bytes);
    key = wanted;
  }
  return *set;
}

// Total bytes of weight copies for the DRAM-bound benchmarks: well past any L3. (192 MiB was not:
// the Emerald Rapids VM has 260 MiB of L3, and its sparse figures at 30% density came out above
// the dense ones.)
inline constexpr size_t kColdBytes = size_t{1} << 30;

}  // namespace hearth::bench
