// Byte layout of a Q8 activation row (ActFormat::Q8), shared by the scalar and AVX2 kernels.
//
// Activations are quantized with ggml's Q8_0 rounding, then stored by groups of 8 blocks
// (kActGroupBytes each; the last group is zero-padded):
//   quants   256 bytes: for each pair of blocks (2p, 2p+1), the first 16 quants of both, then
//            the last 16 of both. A 32-byte load then matches two Q4_0 weight blocks loaded
//            side by side, low nibbles against the first load, high nibbles against the second.
//   scales   8 floats  (f16-rounded block scales)
//   sums     32 bytes: in ActFormat::Q8 rows 8 int32, each block's sum of quants (for Q4_0's
//            offset of 8); in ActFormat::Q8K rows (the 256-weight super-block types) 16 int16,
//            the sums of each block's first and last 16 quants (for Q2_K's minimum per 16
//            weights), whose pairs add up to the blocks' sums (act_block_sum).
// Scales and sums are in lane order: block k of the group sits in lane act_lane(k), the order in
// which a tree of horizontal adds over the pairs leaves the blocks' integer dot products. In Q8K
// rows block k's two sums of 16 are int16 elements 2 act_lane(k) and 2 act_lane(k) + 1, so one
// vpmaddwd against per-16 weights in the same order gives per-block sums in lane order (and one
// against ones the blocks' sums).
#pragma once

#include <cstdint>
#include <cstring>

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
// Within an activation group: the int32 sum of the block in lane `lane` (Q8 rows), and the int16
// sum of its first (half 0) or last 16 quants (Q8K rows).
constexpr int64_t act_group_sum_at(int lane) { return kActSumsOffset + 4 * lane; }
constexpr int64_t act_group_half_at(int lane, int64_t half) {
  return kActSumsOffset + (2 * lane + half) * 2;
}
constexpr int64_t act_sum_offset(int64_t b) {
  return b / kActGroupBlocks * kActGroupBytes + act_group_sum_at(act_lane(b % kActGroupBlocks));
}

// Byte offset in a Q8K row of the int16 sum of quants [16 half, 16 half + 16) of block b.
constexpr int64_t act_sum16_offset(int64_t b, int64_t half) {
  return b / kActGroupBlocks * kActGroupBytes +
         act_group_half_at(act_lane(b % kActGroupBlocks), half);
}

// Block b's scale and sums in an activation row, from the sums of its first and last 16 quants:
// in a Q8K row (q8k) those two, in a Q8 row their total.
inline void store_act_sums(uint8_t* row, int64_t b, float d, const int16_t (&half)[2], bool q8k) {
  std::memcpy(row + act_scale_offset(b), &d, sizeof d);
  if (q8k) {
    std::memcpy(row + act_sum16_offset(b, 0), half, sizeof half);
  } else {
    const int32_t sum = half[0] + half[1];
    std::memcpy(row + act_sum_offset(b), &sum, sizeof sum);
  }
}

// In a Q8K row: the sum of the first (h = 0) or the last 16 quants of the block in lane `lane` of
// the activation group at `group`.
inline int32_t act_half_sum(const uint8_t* group, int lane, int h) {
  int16_t half;
  std::memcpy(&half, group + act_group_half_at(lane, h), sizeof half);
  return half;
}

// The sum of the quants of the block in lane `lane` of the activation group at `group`, in a Q8K
// row (q8k) or a Q8 row.
inline int32_t act_block_sum(const uint8_t* group, int lane, bool q8k) {
  if (q8k) return act_half_sum(group, lane, 0) + act_half_sum(group, lane, 1);
  int32_t sum;
  std::memcpy(&sum, group + act_group_sum_at(lane), sizeof sum);
  return sum;
}

// Row bytes for n elements (n a multiple of 32).
constexpr int64_t act_q8_row_bytes(int64_t n) {
  return (n / kQK + kActGroupBlocks - 1) / kActGroupBlocks * kActGroupBytes;
}

}  // namespace hearth::cpu
