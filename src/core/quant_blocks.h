// ggml's block layouts for the legacy types beyond Q8_0/Q4_0 (32 weights per block), the K-quants
// (256-weight super-blocks of 16 or 32-weight sub-blocks with packed integer scales) and the
// IQ4 types (4-bit indices into a fixed non-linear table). Bit-exact with ggml: a GGUF tensor's
// bytes are read through these structs as they are.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth {

inline constexpr int64_t kQK_K = 256;  // weights per K-quant / IQ4_XS super-block

// w = d * q + m, q the nibble (low nibbles weights 0..15, high nibbles 16..31).
struct BlockQ4_1 {
  uint16_t d, m;  // f16
  uint8_t qs[kQK / 2];
};
// w = d * (q - 16), q 5 bits: the nibble as in Q4_0, bit j of qh (little-endian) the fifth bit
// of weight j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// w = d * q + m, q 5 bits as in Q5_0.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// w = d * kIq4nlValues[nibble], nibbles as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// 16 sub-blocks of 16: w = d * (sc & 15) * q - dmin * (sc >> 4), q 2 bits. Weights 128h + 32k + l
// (k < 4, l < 32) sit in bits 2k of qs[32h + l]; sub-block s covers weights 16s..16s+15.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d, dmin;
};
// 16 sub-blocks of 16: w = d * (sc - 32) * (q - 4 * !hbit), q 2 bits laid out as in Q2_K, hbit
// bit k + 4h of hmask[l] for weight 128h + 32k + l, sc 6 bits packed in 12 bytes (q3k_scale).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32: w = d * sc * q - dmin * m, q 4 bits (weights 64i + l: low nibble of
// qs[32i + l]; 64i + 32 + l: high nibble), sc and m 6 bits packed in 12 bytes (k4_scale_min).
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// Q4_K plus a fifth bit: bit 2i of qh[l] for weight 64i + l, bit 2i + 1 for 64i + 32 + l.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: w = d * sc * (q - 32), q 6 bits. In each half h (128 weights), weight
// 128h + 32k + l (l < 32) has its low 4 bits in ql[64h + l + 32 (k & 1)] (low nibble for k < 2,
// high for k >= 2) and its top 2 bits at bits 2k of qh[32h + l]; sc is int8.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// 8 sub-blocks of 32: w = d * (ls - 32) * kIq4nlValues[nibble], ls 6 bits (low 4 in
// scales_l[i / 2] at bits 4 (i & 1), high 2 in scales_h at bits 2i); nibbles per sub-block as in
// IQ4_NL.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// The accessors below are `static`, like core/fp16.h: vector kernel files include this header
// too, and with plain inline linkage the linker could hand scalar callers their AVX-encoded copy.

// The IQ4 code book: 16 levels, denser near zero, as ggml defines it.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Scale and min (6 bits each) of sub-block j (0..7) of Q4_K / Q5_K: the first four in the low 6
// bits of bytes j and j + 4, the last four split between a nibble of byte j + 4 and the top two
// bits of bytes j - 4 and j.
struct ScaleMin {
  uint8_t scale, min;
};
static constexpr ScaleMin k4_scale_min(const uint8_t* q, int j) {
  if (j < 4) return {static_cast<uint8_t>(q[j] & 63), static_cast<uint8_t>(q[j + 4] & 63)};
  return {static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4))};
}

// The 6-bit scale (0..63, before the -32) of sub-block j (0..15) of Q3_K: its low 4 bits are a
// nibble of byte j % 8 (low for j < 8), its high 2 bits are bits 2 (j / 4) of byte 8 + j % 4.
static constexpr int q3k_scale(const uint8_t* s, int j) {
  const int low = (s[j % 8] >> (j < 8 ? 0 : 4)) & 0xf;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | high << 4;
}

// Q6_K's 6-bit code (0..63, before the -32) of weight i (0..255).
static constexpr int q6k_code(const BlockQ6_K& b, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  const uint8_t lo = b.ql[64 * h + l + 32 * (k & 1)];
  const int low = k < 2 ? lo & 0xf : lo >> 4;
  return low | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4;
}

// Q2_K's 2-bit code of weight i; Q3_K's signed code (-4..3) of weight i.
static constexpr int q2k_code(const uint8_t* qs, int i) {
  return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}
static constexpr int q3k_code(const BlockQ3_K& b, int i) {
  const int high = (b.hmask[i % 32] >> (i / 32)) & 1;
  return q2k_code(b.qs, i) - (high ? 0 : 4);
}

// Q4_K's nibble of weight i; Q5_K's 5-bit code of weight i.
static constexpr int q4k_code(const uint8_t* qs, int i) {
  const uint8_t byte = qs[32 * (i / 64) + i % 32];
  return (i % 64) < 32 ? byte & 0xf : byte >> 4;
}
static constexpr int q5k_code(const BlockQ5_K& b, int i) {
  return q4k_code(b.qs, i) | ((b.qh[i % 32] >> (i / 32)) & 1) << 4;
}

// The 5-bit code of weight j (0..31) of a Q5_0 / Q5_1 block (qh read little-endian).
static constexpr int q5_code(const uint8_t* qs, const uint8_t* qh, int j) {
  const int nibble = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
  return nibble | ((qh[j / 8] >> (j % 8)) & 1) << 4;
}

// The 6-bit scale (0..63, before the -32) of sub-block i (0..7) of IQ4_XS.
static constexpr int iq4xs_scale(const BlockIQ4_XS& b, int i) {
  return ((b.scales_l[i / 2] >> (4 * (i & 1))) & 0xf) | ((b.scales_h >> (2 * i)) & 3) << 4;
}

}  // namespace hearth
