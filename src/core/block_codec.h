// The per-type block quantizers behind quantize_blocks.h, as a table the row drivers walk: each
// new block type has a reference quantizer (ggml's unweighted algorithm) and an
// importance-weighted search. quantize_legacy.cc and quantize_kquants.cc define them.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth {

struct BlockCodec {
  int64_t block_size = 0;  // weights per block
  // x[block_size] -> one block at y.
  void (*reference)(const float* x, void* y) = nullptr;
  // The same under importance weights qw[block_size] (nullptr: every weight counts the same).
  void (*search)(const float* x, const float* qw, void* y) = nullptr;
  // A faster fit, slightly coarser than the reference, for blocks made at load (nullptr: the
  // reference is fast enough).
  void (*quick)(const float* x, void* y) = nullptr;
};

// A codec from one function fit(x, qw, reference, y) that does both (reference ignores qw).
using BlockFit = void (*)(const float* x, const float* qw, bool reference, void* y);
template <BlockFit Fit>
constexpr BlockCodec make_codec(int64_t block_size, void (*quick)(const float*, void*) = nullptr) {
  return {block_size, [](const float* x, void* y) { Fit(x, nullptr, true, y); },
          [](const float* x, const float* qw, void* y) { Fit(x, qw, false, y); }, quick};
}

// The codec of a 32-weight type (Q4_1, Q5_0, Q5_1, IQ4_NL), or nullptr.
const BlockCodec* legacy_codec(DType t);
// The codec of a 256-weight type (Q2_K .. Q6_K, IQ4_XS), or nullptr.
const BlockCodec* kquant_codec(DType t);

}  // namespace hearth
