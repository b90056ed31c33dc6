// Plain types the kernel launchers (*.cuh) and their host callers share. Internal to
// device/cuda/.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth::gpu {

// Tokens one kernel thread (or warp) carries at once: each weight element is read once for
// all of them. Longer batches take several tiles (grid.y).
inline constexpr int kTokenTile = 8;

// From this many tokens on, the attention block's products go through cuBLAS (linear.h).
inline constexpr int64_t kGemmMinTokens = 32;

// A weight matrix in device memory, ggml layout: `rows` rows of `cols` elements, `row_bytes` apart.
struct MatrixView {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
};

// What a hot FFN reports back to the host after a layer (ffn_end): sizes of the active lists.
struct FfnCounters {
  int32_t k_union = 0;      // hot neurons active for some token (the gathered up/gate rows)
  int32_t k_down = 0;       // of those, the ones whose down row is read (two-stage Threshold)
  uint64_t pairs = 0;       // (token, neuron) pairs that fire
  uint64_t pairs_down = 0;  // (token, neuron) pairs left after the down threshold
};

}  // namespace hearth::gpu
