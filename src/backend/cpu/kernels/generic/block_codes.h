// The integer form in which every block weight type meets Q8 activations: the definition that the
// scalar references compute and every vector kernel reproduces.
//
// For each 32-weight block b of a row (one Q8 activation block), a type gives integer codes q[32],
// integer scales s[2] and mins m[2] for the two halves (weights 0-15, 16-31), and float factors
// D and M, such that weight i of the block is D * s[i / 16] * q[i] + M * m[i / 16] (up to float
// rounding; dequantize_row is the exact float definition). A dot product with an activation block
// of quants x and scale dx is then
//   isum = sum_h s[h] * sum_{i in h} q[i] * x[i]     (exact, in int32)
//   msum = sum_h m[h] * sum_{i in h} x[i]            (exact; only types with mins)
//   lane += float(isum) * (D * dx);  lane += float(msum) * (M * dx)
// with lane = act_lane(b % 8) as for Q8_0/Q4_0 (generic_kernels.h, kLanes).
//
// Include only from scalar code (generic/ and tests): the functions are inline and must not
// be compiled with AVX2 code generation.
#pragma once

#include <cstdint>

#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace hearth::cpu::generic {

struct BlockCodes {
  int8_t q[kQK];
  int16_t s[2] = {1, 1};
  int16_t m[2] = {0, 0};
  float d = 0.0f, mf = 0.0f;
};

// One type's reading of block b of a row; kHasMin says whether m/mf are used.
struct CodesQ4_1 {
  static constexpr bool kHasMin = true;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    const BlockQ4_1& k = static_cast<const BlockQ4_1*>(row)[b];
    for (int j = 0; j < kQK / 2; ++j) {
      c.q[j] = static_cast<int8_t>(k.qs[j] & 0xf);
      c.q[j + kQK / 2] = static_cast<int8_t>(k.qs[j] >> 4);
    }
    c.m[0] = c.m[1] = 1;
    c.d = fp16_to_fp32(k.d);
    c.mf = fp16_to_fp32(k.m);
  }
};
struct CodesQ5_0 {
  static constexpr bool kHasMin = false;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    const BlockQ5_0& k = static_cast<const BlockQ5_0*>(row)[b];
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q5_code(k.qs, k.qh, j) - 16);
    c.d = fp16_to_fp32(k.d);
  }
};
struct CodesQ5_1 {
  static constexpr bool kHasMin = true;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    const BlockQ5_1& k = static_cast<const BlockQ5_1*>(row)[b];
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q5_code(k.qs, k.qh, j));
    c.m[0] = c.m[1] = 1;
    c.d = fp16_to_fp32(k.d);
    c.mf = fp16_to_fp32(k.m);
  }
};
struct CodesIQ4_NL {
  static constexpr bool kHasMin = false;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    const BlockIQ4_NL& k = static_cast<const BlockIQ4_NL*>(row)[b];
    for (int j = 0; j < kQK / 2; ++j) {
      c.q[j] = kIq4nlValues[k.qs[j] & 0xf];
      c.q[j + kQK / 2] = kIq4nlValues[k.qs[j] >> 4];
    }
    c.d = fp16_to_fp32(k.d);
  }
};

// K-quants: block b is sub-block (or sub-block pair) b % 8 of super-block b / 8.
template <typename Block>
const Block& super_block(const void* row, int64_t b, int& first) {
  first = static_cast<int>(b % (kQK_K / kQK)) * kQK;
  return static_cast<const Block*>(row)[b / (kQK_K / kQK)];
}

struct CodesQ2_K {
  static constexpr bool kHasMin = true;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    int i0;
    const BlockQ2_K& k = super_block<BlockQ2_K>(row, b, i0);
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q2k_code(k.qs, i0 + j));
    for (int h = 0; h < 2; ++h) {
      const uint8_t sc = k.scales[(i0 + 16 * h) / 16];
      c.s[h] = static_cast<int16_t>(sc & 0xf);
      c.m[h] = static_cast<int16_t>(sc >> 4);
    }
    c.d = fp16_to_fp32(k.d);
    c.mf = -fp16_to_fp32(k.dmin);
  }
};
struct CodesQ3_K {
  static constexpr bool kHasMin = false;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    int i0;
    const BlockQ3_K& k = super_block<BlockQ3_K>(row, b, i0);
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q3k_code(k, i0 + j));
    for (int h = 0; h < 2; ++h) {
      c.s[h] = static_cast<int16_t>(q3k_scale(k.scales, (i0 + 16 * h) / 16) - 32);
    }
    c.d = fp16_to_fp32(k.d);
  }
};
template <typename Block>
void k4_scales(const Block& k, int i0, BlockCodes& c) {
  const ScaleMin sm = k4_scale_min(k.scales, i0 / kQK);
  c.s[0] = c.s[1] = sm.scale;
  c.m[0] = c.m[1] = sm.min;
  c.d = fp16_to_fp32(k.d);
  c.mf = -fp16_to_fp32(k.dmin);
}
struct CodesQ4_K {
  static constexpr bool kHasMin = true;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    int i0;
    const BlockQ4_K& k = super_block<BlockQ4_K>(row, b, i0);
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q4k_code(k.qs, i0 + j));
    k4_scales(k, i0, c);
  }
};
struct CodesQ5_K {
  static constexpr bool kHasMin = true;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    int i0;
    const BlockQ5_K& k = super_block<BlockQ5_K>(row, b, i0);
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q5k_code(k, i0 + j));
    k4_scales(k, i0, c);
  }
};
struct CodesQ6_K {
  static constexpr bool kHasMin = false;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    int i0;
    const BlockQ6_K& k = super_block<BlockQ6_K>(row, b, i0);
    for (int j = 0; j < kQK; ++j) c.q[j] = static_cast<int8_t>(q6k_code(k, i0 + j) - 32);
    for (int h = 0; h < 2; ++h) c.s[h] = k.scales[(i0 + 16 * h) / 16];
    c.d = fp16_to_fp32(k.d);
  }
};
struct CodesIQ4_XS {
  static constexpr bool kHasMin = false;
  static void get(const void* row, int64_t b, BlockCodes& c) {
    int i0;
    const BlockIQ4_XS& k = super_block<BlockIQ4_XS>(row, b, i0);
    const uint8_t* qs = k.qs + i0 / 2;
    for (int j = 0; j < kQK / 2; ++j) {
      c.q[j] = kIq4nlValues[qs[j] & 0xf];
      c.q[j + kQK / 2] = kIq4nlValues[qs[j] >> 4];
    }
    c.s[0] = c.s[1] = static_cast<int16_t>(iq4xs_scale(k, i0 / kQK) - 32);
    c.d = fp16_to_fp32(k.d);
  }
};

}  // namespace hearth::cpu::generic
