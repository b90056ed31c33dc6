// Byte layout of a Q8 activation row (ActFormat::Q8), shared by the scalar and AVX2 kernels.
//
// Activations are quantized with ggml's Q8_0 rounding, then stored by groups of 8 blocks
// (kActGroupBytes each; the last group is zero-padded):
//   quants   256 bytes: for each pair of blocks (2p, 2p+1), the first 16 quants of both, then
//            the last 16 of both. A 32-byte load then matches two Q4_0 weight blocks loaded
//            side by side, low nibbles against the first load, high nibbles against the second.
//   scales   8 floats  (f16-rounded block scales)
//   sums     8 int32   (sum of each block's quants, for Q4_0's offset of 8)
// Scales and sums are in lane order: block k of the group sits in lane act_lane(k), the order in
// which a tree of horizontal adds over the pairs leaves the blocks' integer dot products.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth::cpu {

inline constexpr int64_t kActGroupBlocks = 8;
inline constexpr int64_t kActGroupBytes = kActGroupBlocks * kQK + 2 * kActGroupBlocks * 4;
inline constexpr int64_t kActScalesOffset = kActGroupBlocks * kQK;
inline constexpr int64_t kActSumsOffset = kActScalesOffset + kActGroupBlocks * 4;

// Blocks 0, 2, 4, 6 fill lanes 0-3 and blocks 1, 3, 5, 7 lanes 4-7.
constexpr int act_lane(int64_t k) { return static_cast<int>((k & 1) * 4 + (k >> 1)); }

// Byte offset in the row of quant j (0..31) of block b.
constexpr int64_t act_quant_offset(int64_t b, int64_t j) {
  const int64_t k = b % kActGroupBlocks;
  return b / kActGroupBlocks * kActGroupBytes + (k / 2) * 64 + (j / 16) * 32 + (k % 2) * 16 +
         j % 16;
}

// Byte offsets in the row of block b's scale (float) and quant sum (int32).
constexpr int64_t act_scale_offset(int64_t b) {
  return b / kActGroupBlocks * kActGroupBytes + kActScalesOffset +
         act_lane(b % kActGroupBlocks) * 4;
}
constexpr int64_t act_sum_offset(int64_t b) {
  return b / kActGroupBlocks * kActGroupBytes + kActSumsOffset + act_lane(b % kActGroupBlocks) * 4;
}

// Row bytes for n elements (n a multiple of 32).
constexpr int64_t act_q8_row_bytes(int64_t n) {
  return (n / kQK + kActGroupBlocks - 1) / kActGroupBlocks * kActGroupBytes;
}

}  // namespace hearth::cpu
