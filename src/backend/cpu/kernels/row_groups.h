// Row groups: 16 rows of a 256-weight (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) or 32-weight block
// (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) matrix rewritten so that the same four weights of every row lie
// side by side, one row per 32-bit lane of a 512-bit vector. A one-token product then needs no
// horizontal sums: vpdpbusd of such a vector against four activation bytes broadcast to every lane
// adds each row's four products into its own lane, and the lanes stay rows to the end. The
// row-major kernels spend about as many instructions reducing each row's sums (one per scale) as
// multiplying; for the 2-bit codes, whose bytes are few, that work is what held decode below the
// memory's speed.
//
// A group is one Group struct per column (a super-block, or a 32-weight block), in column order,
// so rows [16 g, 16 g + 16) of a matrix take exactly the bytes they took before (16 rows of ldw
// bytes): views of whole groups (a fused projection's parts) keep their offsets. Shared by the
// scalar references (generic/row_groups.cc, generic/row_groups_32.cc) and the vector kernels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cpu/kernels/act_layout.h"
#include "core/quant_blocks.h"

namespace hearth::cpu {

inline constexpr int64_t kGroupRows = 16;

// The most tokens of one product that the group kernels take for a decode step (a server's
// parallel sequences) rather than a prompt: see unpack_codes.
inline constexpr int64_t kMaxDecodeStepTokens = 16;

// One super-block column of a 16-row group.
//   codes[4 q + w][4 r + i]: bits 2k hold row r's 2-bit code of weight 16 (4 q + k) + 4 w + i
//     (sub-block 4 q + k, quad w, byte i). Masking a vector of these with 3 << 2k leaves sub-block
//     4 q + k's codes times 4^k, which stay below 256 for vpdpbusd's unsigned bytes.
//   scales[p][2 r + e]: row r's scales byte of sub-block 2 p + e (scale in the low nibble, min in
//     the high one). Widened to int16, each 32-bit lane holds a row's pair of sub-blocks, the
//     operand of one vpmaddwd / vpdpwssd for two sub-blocks.
//   d[r], dmin[r]: row r's f16 scales.
struct GroupQ2_K {
  uint8_t codes[16][64];
  uint8_t scales[8][32];
  uint16_t d[kGroupRows];
  uint16_t dmin[kGroupRows];
};
static_assert(sizeof(GroupQ2_K) == kGroupRows * sizeof(BlockQ2_K));

// One super-block column of a 16-row Q3_K group (codes u - 4, u = low 2 bits + 4 * high bit).
//   codes: the low 2 bits as GroupQ2_K's codes.
//   high[2 q + v][4 r + i]: bit k holds row r's high bit of weight 16 (4 q + k) + 4 (2 v) + i,
//     bit 4 + k that of weight 16 (4 q + k) + 4 (2 v + 1) + i (quads 2v and 2v + 1 of sub-block
//     4 q + k). Masking with 1 << k (after a right shift by 4 for the odd quads) leaves sub-block
//     4 q + k's high bits times 2^k.
//   scale_low[p][r]: the low 4 bits of row r's 6-bit scales of sub-blocks 2 p (low nibble) and
//     2 p + 1 (high nibble).
//   scale_high[p % 4][r]: their high 2 bits, at bits 4 (p / 4) (sub-block 2 p) and 4 (p / 4) + 2
//     (sub-block 2 p + 1).
//   d[r]: row r's f16 scale.
struct GroupQ3_K {
  uint8_t codes[16][64];
  uint8_t high[8][64];
  uint8_t scale_low[8][16];
  uint8_t scale_high[4][16];
  uint16_t d[kGroupRows];
};
static_assert(sizeof(GroupQ3_K) == kGroupRows * sizeof(BlockQ3_K));

// One super-block column of a 16-row Q4_K group (8 sub-blocks of 32, w = d sc q - dmin m).
//   codes[8 m + w][4 r + i]: the low nibble holds row r's code of weight 32 (2 m) + 4 w + i, the
//     high nibble that of weight 32 (2 m + 1) + 4 w + i (quad w of sub-blocks 2m and 2m + 1).
//     Masked with 0xf0 the high ones come times 16, still a byte.
//   scale_low[j][r]: the low 4 bits of row r's 6-bit scale (low nibble) and min (high nibble) of
//     sub-block j.
//   scale_high[j / 2][r]: their high 2 bits, the scale's at bits 4 (j % 2), the min's above them.
//   d[r], dmin[r]: row r's f16 factors.
// A sub-block's 32 codes times activations can pass 2^15, so the kernels pack the sums of its
// two halves of 16 (quads 0-3 and 4-7) as an int16 pair, against the scale in both halves.
struct GroupQ4_K {
  uint8_t codes[32][64];
  uint8_t scale_low[8][16];
  uint8_t scale_high[4][16];
  uint16_t d[kGroupRows];
  uint16_t dmin[kGroupRows];
};
static_assert(sizeof(GroupQ4_K) == kGroupRows * sizeof(BlockQ4_K));

// One super-block column of a 16-row Q5_K group: GroupQ4_K's fields for the low 4 bits of the
// codes, then their fifth bits.
//   high[w][4 r + i]: bit j holds row r's fifth bit of weight 32 j + 4 w + i (sub-block j, quad
//     w, byte i).
// A sub-block's half can pass 2^15 here, so the kernels meet the scales in int32.
struct GroupQ5_K : GroupQ4_K {
  uint8_t high[8][64];
};
static_assert(sizeof(GroupQ5_K) == kGroupRows * sizeof(BlockQ5_K));

// One super-block column of a 16-row IQ4_XS group (8 sub-blocks of 32, w = d (ls - 32) t[u], t
// IQ4_NL's table, u a nibble).
//   codes[4 j + w][4 r + i]: row r's qs[16 j + 4 w + i], as the block holds it: the low nibble
//     is weight 32 j + 4 w + i, the high nibble weight 32 j + 16 + 4 w + i.
//   scale_low[p][r], scale_high[r]: row r's scales_l[p] and scales_h (ls's low 4 bits of
//     sub-block j at bits 4 (j % 2) of scale_low[j / 2], its high 2 at bits 2 j of scale_high).
//   d[r]: row r's f16 scale.
// The kernels meet t[u] + 128 (an unsigned byte) and take the 128 off per sub-block, whose sums
// pass 2^15: they meet their scales in int32.
struct GroupIQ4_XS {
  uint8_t codes[32][64];
  uint8_t scale_low[4][16];
  uint16_t scale_high[kGroupRows];
  uint16_t d[kGroupRows];
};
static_assert(sizeof(GroupIQ4_XS) == kGroupRows * sizeof(BlockIQ4_XS));

// One super-block column of a 16-row Q6_K group (16 sub-blocks of 16, w = d sc (u - 32), u 6
// bits: 4 low, 2 high).
//   low[8 m + w][4 r + i]: the low 4 bits of row r's code of weight 32 (2 m) + 4 w + i (low
//     nibble) and of weight 32 (2 m + 1) + 4 w + i (high nibble), as GroupQ4_K's codes.
//   high[4 m + w][4 r + i] (w < 4): the top 2 bits of row r's weights 32 (2 m + e) + 4 (w + 4 h)
//     + i at bits 2 (e + 2 h): masked with 3 << 2k, times 4^k.
//   scales[j][r]: row r's int8 scale of sub-block j; d[r] its f16 factor.
// A sub-block's low and high sums (at most 16 * 15 * 127 and 16 * 3 * 127) fit an int16 pair,
// which meets (scale, 16 scale) in one vpdpwssd.
struct GroupQ6_K {
  uint8_t low[32][64];
  uint8_t high[16][64];
  int8_t scales[16][16];
  uint16_t d[kGroupRows];
};
static_assert(sizeof(GroupQ6_K) == kGroupRows * sizeof(BlockQ6_K));

// The 32-weight block types: one group column is one block of each of the 16 rows, and meets one
// Q8 activation block (its own scale and sum).
//   codes[w][4 r + i]: row r's qs[4 w + i], as the block holds it: the low nibble is weight
//     4 w + i, the high nibble weight 16 + 4 w + i.
//   high[4 r + i] (Q5_0, Q5_1): bit q holds the fifth bit of row r's weight 4 q + i (q < 4: the
//     low nibbles of codes[q], q >= 4: the high nibbles of codes[q - 4]).
//   d[r] (and m[r] for the types with a min): row r's f16 factors.
// IQ4_NL's codes index its table of values, as in the block.
struct GroupQ4_0 {
  using Block = BlockQ4_0;  // the type whose rows it holds
  uint8_t codes[4][64];
  uint16_t d[kGroupRows];
};
static_assert(sizeof(GroupQ4_0) == kGroupRows * sizeof(BlockQ4_0));
struct GroupIQ4_NL {
  using Block = BlockIQ4_NL;  // the type whose rows it holds
  uint8_t codes[4][64];
  uint16_t d[kGroupRows];
};
static_assert(sizeof(GroupIQ4_NL) == kGroupRows * sizeof(BlockIQ4_NL));
struct GroupQ4_1 {
  using Block = BlockQ4_1;  // the type whose rows it holds
  uint8_t codes[4][64];
  uint16_t d[kGroupRows];
  uint16_t m[kGroupRows];
};
static_assert(sizeof(GroupQ4_1) == kGroupRows * sizeof(BlockQ4_1));
struct GroupQ5_0 {
  using Block = BlockQ5_0;  // the type whose rows it holds
  uint8_t codes[4][64];
  uint8_t high[64];
  uint16_t d[kGroupRows];
};
static_assert(sizeof(GroupQ5_0) == kGroupRows * sizeof(BlockQ5_0));
struct GroupQ5_1 {
  using Block = BlockQ5_1;  // the type whose rows it holds
  uint8_t codes[4][64];
  uint8_t high[64];
  uint16_t d[kGroupRows];
  uint16_t m[kGroupRows];
};
static_assert(sizeof(GroupQ5_1) == kGroupRows * sizeof(BlockQ5_1));

// The kernels meet a 32-weight type's codes as unsigned bytes u: the weight is d (u - 2^shift)
// for the types without a min (IQ4_NL's u is its table value plus 128), d u + m for the others.
template <typename Group>
constexpr int group_offset_shift() {
  if constexpr (std::is_same_v<Group, GroupQ4_0>) return 3;
  if constexpr (std::is_same_v<Group, GroupQ5_0>) return 4;
  if constexpr (std::is_same_v<Group, GroupIQ4_NL>) return 7;
  return 0;
}

// The 6-bit scale and min of sub-block j of row r of a Q4_K or Q5_K group.
template <typename Group>
constexpr ScaleMin group_q4_k_scale_min(const Group& g, int r, int j) {
  const int low = g.scale_low[j][r], high = g.scale_high[j / 2][r] >> (4 * (j % 2));
  return {static_cast<uint8_t>((low & 15) | (high & 3) << 4),
          static_cast<uint8_t>((low >> 4) | ((high >> 2) & 3) << 4)};
}

// The 6-bit scale (before the -32) of sub-block j of row r of a Q3_K group.
constexpr int group_q3_k_scale(const GroupQ3_K& g, int r, int j) {
  const int p = j / 2;
  const int low = (g.scale_low[p][r] >> (4 * (j % 2))) & 15;
  const int high = (g.scale_high[p % 4][r] >> (4 * (p / 4) + 2 * (j % 2))) & 3;
  return low | high << 4;
}

// Runs tile(g, t, std::integral_constant<int, T>) over ng groups and nt tokens: per group, the
// tokens in tiles of MaxTokens, then one tile of the rest, so each group's bytes are read from
// L1 after its first tile. Every token's output is the same bits in any tile.
template <int T, typename Tile>
void tile_rest(int64_t g, int64_t t, int64_t rest, const Tile& tile) {
  if constexpr (T > 0) {
    if (rest == T) {
      tile(g, t, std::integral_constant<int, T>{});
    } else {
      tile_rest<T - 1>(g, t, rest, tile);
    }
  }
}
template <int MaxTokens, typename Tile>
void for_each_group_tile(int64_t ng, int64_t nt, const Tile& tile) {
  for (int64_t g = 0; g < ng; ++g) {
    int64_t t = 0;
    for (; t + MaxTokens <= nt; t += MaxTokens)
      tile(g, t, std::integral_constant<int, MaxTokens>{});
    tile_rest<MaxTokens - 1>(g, t, nt - t, tile);
  }
}

// Whether a product over groups of nt tokens unpacks each group's codes once into a buffer of its
// own (16 bytes a weight column) for its tiles of tokens to read: only prompts. Decode steps, a
// server's batched ones included, unpack as they go and allocate nothing, so the decode loop
// never allocates (DESIGN.md); a prompt's product allocates that buffer once per call and thread.
constexpr bool unpack_codes(int64_t nt) { return nt > kMaxDecodeStepTokens; }

// The driver of group kernels whose prompt tiles read codes unpacked once per group and call:
// where unpack_codes(nt) (a prompt), unpack(g) once per group into the caller's buffer, then
// tile(g, t, tokens) for each of its tiles of up to MaxTokens (as for_each_group_tile); otherwise
// (decode steps) direct(g, t, tokens) for each tile, which unpacks as it goes.
template <int MaxTokens, typename Direct, typename Unpack, typename Tile>
void for_each_unpacked_tile(int64_t ng, int64_t nt, const Direct& direct, const Unpack& unpack,
                            const Tile& tile) {
  if (!unpack_codes(nt)) {
    for_each_group_tile<MaxTokens>(ng, nt, direct);
    return;
  }
  int64_t unpacked = -1;
  for_each_group_tile<MaxTokens>(ng, nt, [&](int64_t g, int64_t t, auto tokens) {
    if (g != unpacked) {
      unpack(g);
      unpacked = g;
    }
    tile(g, t, tokens);
  });
}

// Within a Q8K activation row's super-block (one group of act_layout.h): the offset of
// sub-block j's 16 quants (block j / 2's first or last 16), and of the int16 pair of sums of 16
// of sub-blocks 2 p and 2 p + 1 (block p's two halves, side by side).
constexpr int64_t act_sub16_offset(int64_t j) { return act_quant_offset(j / 2, (j % 2) * 16); }
constexpr int64_t act_sum16_pair_offset(int64_t p) { return act_sum16_offset(p, 0); }

// Both, for every sub-block and pair: vector files hold them as constants
// (constexpr auto k = row_group_act_offsets()), so none of these functions is compiled with their
// flags (an out-of-line copy built with AVX-512 could be the one a scalar caller links to).
// For the 32-weight types, per block k of an activation group: its first quant, its scale and its
// int32 sum (Q8 rows); quads sit at quant + 4 w (low nibbles) and quant + 32 + 4 w (high ones).
struct RowGroupActOffsets {
  int64_t sub16[16];
  int64_t pair[8];
  int64_t quant[kActGroupBlocks];
  int64_t scale[kActGroupBlocks];
  int64_t sum[kActGroupBlocks];
};
constexpr RowGroupActOffsets row_group_act_offsets() {
  RowGroupActOffsets o{};
  for (int j = 0; j < 16; ++j) o.sub16[j] = act_sub16_offset(j);
  for (int p = 0; p < 8; ++p) o.pair[p] = act_sum16_pair_offset(p);
  for (int k = 0; k < kActGroupBlocks; ++k) {
    o.quant[k] = act_quant_offset(k, 0);
    o.scale[k] = act_scale_offset(k);
    o.sum[k] = act_sum_offset(k);
  }
  return o;
}

}  // namespace hearth::cpu
