// Scalar dot products and the reference tile kernel (a plain loop of dot products).
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/generic/act_q8_reader.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"

namespace hearth::cpu::generic {
namespace {

struct LoadF32 {
  static float at(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static float at(const void* p, int64_t i) {
    return fp16_to_fp32(static_cast<const uint16_t*>(p)[i]);
  }
};
struct LoadBf16 {
  static float at(const void* p, int64_t i) {
    return bf16_to_fp32(static_cast<const uint16_t*>(p)[i]);
  }
};

// Lane j sums the products at i = j (mod kLanes), then the lanes are added pairwise, mirroring
// the vector kernels' accumulator layout.
template <typename Load>
float dot_float(int64_t n, const void* w, const void* x) {
  const auto* xf = static_cast<const float*>(x);
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += Load::at(w, i + j) * xf[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] += Load::at(w, i) * xf[i];
  return reduce_lanes(lanes);
}

}  // namespace

float dot_f32(int64_t n, const void* w, const void* x) { return dot_float<LoadF32>(n, w, x); }
float dot_f16(int64_t n, const void* w, const void* x) { return dot_float<LoadF16>(n, w, x); }
float dot_bf16(int64_t n, const void* w, const void* x) { return dot_float<LoadBf16>(n, w, x); }

namespace {

// The 32-weight blocks against Q8 activations: each block's integer sum of its weights (decoded
// to int8 by `Block::weight(blk, j)`, j < 32) times the activations, scaled by both scales into
// the lane the vector kernels give that block.
template <typename Block>
float dot_blocks(int64_t n, const void* w, const void* x) {
  const auto* wb = static_cast<const typename Block::Type*>(w);
  const ActQ8 a(x);
  float lanes[kLanes] = {};
  for (int64_t b = 0; b < n / kQK; ++b) {
    const int8_t* lo = a.first16(b);
    const int8_t* hi = a.last16(b);
    int32_t isum = 0;
    for (int64_t j = 0; j < kQK / 2; ++j) isum += Block::weight(wb[b], j) * lo[j];
    for (int64_t j = 0; j < kQK / 2; ++j) isum += Block::weight(wb[b], j + kQK / 2) * hi[j];
    lanes[act_lane(b % kActGroupBlocks)] +=
        fp16_to_fp32(wb[b].d) * a.d(b) * static_cast<float>(isum);
  }
  return reduce_lanes(lanes);
}

struct Q8_0Weights {
  using Type = BlockQ8_0;
  static int32_t weight(const BlockQ8_0& blk, int64_t j) { return blk.qs[j]; }
};
// Weight j < 16 is the low nibble of byte j, weight 16 + j its high nibble, both offset by 8.
struct Q4_0Weights {
  using Type = BlockQ4_0;
  static int32_t weight(const BlockQ4_0& blk, int64_t j) {
    return j < kQK / 2 ? (blk.qs[j] & 0x0f) - 8 : (blk.qs[j - kQK / 2] >> 4) - 8;
  }
};

}  // namespace

float dot_q8_0(int64_t n, const void* w, const void* x) { return dot_blocks<Q8_0Weights>(n, w, x); }
float dot_q4_0(int64_t n, const void* w, const void* x) { return dot_blocks<Q4_0Weights>(n, w, x); }

}  // namespace hearth::cpu::generic
