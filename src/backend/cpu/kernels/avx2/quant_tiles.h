// The block-pair tile engine behind the Q8_0 and Q4_0 kernels, shared by the AVX2 and the VNNI
// variants (AVX-VNNI, AVX512-VNNI), which differ only in how a pair of weight blocks meets 64
// activation quants (the `products` of a weight format: gemm_quant_avx2.cc, vnni_weights.h). The
// tile loop around a group is group_tiles.h's. Include only from files compiled with
// AVX2/FMA/F16C (the avx2/, avxvnni/ and avx512/ folders).
//
// Blocks go by pairs and groups of 8. Two weight blocks are loaded side by side so one 8-bit
// multiply-add covers both, leaving 4 int32 partial sums per block; two levels of horizontal adds
// over a group's 4 pairs then give each block's exact integer dot product in one vector, which is
// converted and scaled by the 8 block scale products in a single FMA. Scaling every block on its
// own would cost a broadcast, a conversion and an FMA per block, which is what bounds Q4_0 matvec.
//
// Q4_0 nibbles u = q + 8 are multiplied as unsigned bytes and 8 * (sum of the activation quants)
// is subtracted per block. Q8_0 with AVX2 moves the weight's sign onto the activation instead
// (maddubs' int16 pair sums would overflow with w + 128); VNNI, which adds into int32 lanes
// directly, takes Q8_0 the way of Q4_0: u = w + 128, then 128 * (sum of the activation quants)
// subtracted, which saves the two sign operations per pair and token.
//
// Every (row, token) output goes through the same operations whatever the tile shape, so
// matmul rows equal matvec results bit for bit.
//
// The templates here are only instantiated with each variant's weight formats, which live in an
// anonymous namespace, so every instantiation stays private to its translation unit and code
// built with -mavxvnni can never stand in for the plain AVX2 copy at link time.
#pragma once

#include "backend/cpu/kernels/act_layout.h"
#include "core/dtype.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/group_tiles.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

inline constexpr int kGroup = static_cast<int>(kActGroupBlocks);

inline __m256i load_pair(const void* first, const void* second) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(second),
                             reinterpret_cast<const __m128i*>(first));
}

// Unsigned nibbles of Q4_0 blocks (b, b + 1): first 16 weights of both, last 16 of both.
struct Q4_0Pair {
  __m256i lo, hi;
};
inline Q4_0Pair prepare_q4_0(const BlockQ4_0* b) {
  const __m256i both = load_pair(b[0].qs, b[1].qs);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  return {_mm256_and_si256(both, mask), _mm256_and_si256(_mm256_srli_epi16(both, 4), mask)};
}

// Q8_0 blocks (b, b + 1) in the same order, with their magnitudes: the unsigned operand of the
// 8-bit multiply-adds is |w|, and sign(w) moves onto the activation.
struct Q8_0Pair {
  __m256i abs_lo, lo, abs_hi, hi;
};
inline Q8_0Pair prepare_q8_0(const BlockQ8_0* b) {
  const __m256i lo = load_pair(b[0].qs, b[1].qs);
  const __m256i hi = load_pair(b[0].qs + 16, b[1].qs + 16);
  return {_mm256_sign_epi8(lo, lo), lo, _mm256_sign_epi8(hi, hi), hi};
}

// Q8_0 blocks (b, b + 1) in the same order as offset binary: w + 128 as unsigned bytes.
struct Q8_0OffsetPair {
  __m256i lo, hi;
};
inline Q8_0OffsetPair prepare_q8_0_offset(const BlockQ8_0* b) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  return {_mm256_xor_si256(load_pair(b[0].qs, b[1].qs), flip),
          _mm256_xor_si256(load_pair(b[0].qs + 16, b[1].qs + 16), flip)};
}

// What every ISA's weight traits share per format (block type, prepared pair, the offset of the
// unsigned operand as a power of two: u = q + (1 << kOffsetShift), none for 0); each ISA adds its
// own 8-bit products() on top.
struct Q4_0Format {
  using Block = BlockQ4_0;
  using Pair = Q4_0Pair;
  static constexpr int kOffsetShift = 3;
  static Pair prepare(const Block* b) { return prepare_q4_0(b); }
};
struct Q8_0Format {
  using Block = BlockQ8_0;
  using Pair = Q8_0Pair;
  static constexpr int kOffsetShift = 0;
  static Pair prepare(const Block* b) { return prepare_q8_0(b); }
};
struct Q8_0OffsetFormat {
  using Block = BlockQ8_0;
  using Pair = Q8_0OffsetPair;
  static constexpr int kOffsetShift = 7;
  static Pair prepare(const Block* b) { return prepare_q8_0_offset(b); }
};

// The f16 scales of a group's 8 blocks as floats in lane order (blocks 0, 2, 4, 6, 1, 3, 5, 7).
// The halves are packed in general-purpose registers, whose ALUs are idle here, leaving the
// vector shuffle ports to the reduction trees.
template <typename Block>
__m256 group_scales(const Block* b) {
  const auto four = [b](int k) {
    return static_cast<uint64_t>(b[k].d) | static_cast<uint64_t>(b[k + 2].d) << 16 |
           static_cast<uint64_t>(b[k + 4].d) << 32 | static_cast<uint64_t>(b[k + 6].d) << 48;
  };
  return _mm256_cvtph_ps(
      _mm_set_epi64x(static_cast<int64_t>(four(1)), static_cast<int64_t>(four(0))));
}

// The quant engine for GroupTiles: a group is 8 blocks of WB::Block.
template <typename WB>
struct QuantEngine {
  using Block = typename WB::Block;
  static constexpr int kGroupBlocks = kGroup;

  // One group: R weight rows (pointers to the group's first block) and T activation groups.
  template <int R, int T>
  static void accumulate(const uint8_t* const (&rows)[R], const uint8_t* const (&x)[T],
                         __m256 (&acc)[R][T]) {
    const Block* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(rows[r]);
    // The trees of pair_tree_add (group_tiles.h): after pairs 0-1 `half` holds [b0 b0 b2 b2 | b1
    // b1 b3 b3] partial sums.
    __m256i pending[R][T], half[R][T], sums[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) pending[r][t] = half[r][t] = sums[r][t] = _mm256_setzero_si256();
    }
    // Unrolled, so that which tree level a pair feeds is decided at compile time: left as a loop,
    // GCC tests p at run time and copies the partial trees between registers and the stack.
#pragma GCC unroll 4
    for (int p = 0; p < kGroup / 2; ++p) {
      typename WB::Pair wp[R];
      for (int r = 0; r < R; ++r) wp[r] = WB::prepare(w[r] + 2 * p);
      for (int t = 0; t < T; ++t) {
        const auto* xq = reinterpret_cast<const __m256i*>(x[t] + 64 * p);
        const __m256i x_lo = _mm256_loadu_si256(xq);
        const __m256i x_hi = _mm256_loadu_si256(xq + 1);
        for (int r = 0; r < R; ++r) {
          pair_tree_add(p, WB::products(wp[r], x_lo, x_hi), pending[r][t], half[r][t], sums[r][t]);
        }
      }
    }
    __m256 dw[R];
    for (int r = 0; r < R; ++r) dw[r] = group_scales(w[r]);
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_loadu_ps(reinterpret_cast<const float*>(x[t] + kActScalesOffset));
      __m256i offset = _mm256_setzero_si256();
      if constexpr (WB::kOffsetShift > 0) {
        const auto* s = reinterpret_cast<const __m256i*>(x[t] + kActSumsOffset);
        offset = _mm256_slli_epi32(_mm256_loadu_si256(s), WB::kOffsetShift);
      }
      for (int r = 0; r < R; ++r) {
        __m256i s = sums[r][t];
        if constexpr (WB::kOffsetShift > 0) s = _mm256_sub_epi32(s, offset);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw[r], dx), acc[r][t]);
      }
    }
  }
};
template <typename WB>
using QuantTiles = GroupTiles<QuantEngine<WB>>;

// dot, gemm and gemm_gather of a quantized weight type. Tile shapes: 2 rows x 4 tokens leaves
// room for the partial trees in registers; a single token streams runs of consecutive rows one at
// a time and scattered rows 4 at a time (TileSet::gemv).
template <typename WB>
void set_quant_tile_kernels(WeightKernels& k) {
  using Tiles = QuantTiles<WB>;
  set_tile_kernels<Tiles, gemm_by_tokens<Tiles, 4, 2, 4>>(k);
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
