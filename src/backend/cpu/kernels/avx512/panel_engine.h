// The row-panel engine for prompt products with 512-bit vpdpbusd: 16 weight rows, one per 32-bit
// lane, against many tokens. The formats are in quant_panels.h (the 32-weight block types) and
// kquant_panels.h (the super-block types).
//
// The tile engines (avx2/group_tiles.h) leave each block's sum spread over four int32 lanes and
// gather it with horizontal adds, a shuffle for every two 8-bit products; a zmm product there
// would need a tree across 128-bit lanes as well. Here 16 rows are first repacked into a panel,
// once per product and token block and reused by every token: for each block of 32 weights and
// each run of 4 codes, one zmm holds those 4 codes of all 16 rows, so vpdpbusd against the
// token's 4 activation quants broadcast to every lane adds them straight into each row's lane.
// Eight products give a block's exact integer sum for 16 rows, with no reduction at all.
//
// Every output goes through the tile engines' float operations in their order: per block, the
// format's finish (the same rounding steps as its tile finish) into the accumulator of the
// block's act_lane, and the 8 lane accumulators summed at the end in hsum's tree. So a prompt
// token's output equals the one-token matvec's bit for bit (batch invariance), and the integer
// sums, being exact, may be formed in any order.
//
// A format F gives
//   Block, kGroupBlocks (blocks of F::Block per activation group: 8, or 1 super-block);
//   kSide: float vectors of 16 rows per block of 32 weights that finish reads (scales, mins);
//   pack_group(rows, valid, codes, side): one activation group of 16 rows (rows[r] the group's
//     first block, null past the matrix; blocks from `valid` on are zero padding) into 8 blocks
//     of codes (store_runs) and side data;
//   kSums: integer sums per block and row, 1, or 2 for formats with a scale per 16 weights
//     (runs 0-3 and 4-7);
//   start(s): the initial int32 sum over weights whose activation quants sum to s (the block's
//     32 with one sum, each 16 with two);
//   finish(side, sums, acts, acc): acc plus the block's term, as the tile engine rounds it.
//
// The panels need a buffer of 32 rows' codes (one byte per weight) and side data per product;
// products of few tokens, where repacking would not pay, keep the tile engines.
// Include only from files compiled with the avx512/ flags.
#pragma once

#include <algorithm>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/tile_set.h"
#include "core/aligned_buffer.h"
#include "core/dtype.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {

inline constexpr int kPanelRows = 16;
// Bytes of one block of 32 weights in a panel: 8 runs of 4 codes for 16 rows.
inline constexpr int64_t kPanelBlockBytes = kQK * kPanelRows;
// Tokens that share each pass over a panel (the accumulators live in memory, so this is bounded
// by the int32 sums held in registers, not by the accumulators).
inline constexpr int kPanelTokens = 6;
// Panels that share each broadcast of activation quants.
inline constexpr int kPanelSet = 2;
// Below this many tokens a product keeps the tile engines: repacking a block costs about as much
// as computing it for ten tokens, and at 8 tokens the two run alike.
inline constexpr int64_t kPanelMinTokens = 16;
// Activation bytes of the tokens that meet each panel in turn (panel_gemm).
inline constexpr size_t kPanelActBytes = 384 * 1024;

// [a | b]. (The masked forms here and in the formats: GCC 12's unmasked ones trip
// -Wuninitialized.)
inline __m512i join(__m256i a, __m256i b) {
  return _mm512_mask_broadcast_i64x4(_mm512_maskz_broadcast_i64x4(0x0f, a), 0xf0, b);
}

// permutex2var indices of store_runs' 16 x 8 transpose of 32-bit runs: index i < 16 picks
// element i of the first operand, i + 16 element i of the second.
struct TransposeIndex {
  int32_t v[16];
};
// Stage 1: rows 4i..4i+3 (two per input), half h of the runs; element k * 4 + r.
constexpr TransposeIndex stage1_index(int h) {
  TransposeIndex t{};
  for (int k = 0; k < 4; ++k) {
    for (int r = 0; r < 4; ++r) t.v[k * 4 + r] = (r / 2) * 16 + (r % 2) * 8 + h * 4 + k;
  }
  return t;
}
// Stage 2: rows 8j..8j+7 (four per input), runs 2m and 2m + 1 of a half; element k * 8 + r.
constexpr TransposeIndex stage2_index(int m) {
  TransposeIndex t{};
  for (int k = 0; k < 2; ++k) {
    for (int r = 0; r < 8; ++r) t.v[k * 8 + r] = (r / 4) * 16 + (2 * m + k) * 4 + r % 4;
  }
  return t;
}
// Stage 3: all 16 rows (eight per input) of run k of the pair; element r.
constexpr TransposeIndex stage3_index(int k) {
  TransposeIndex t{};
  for (int r = 0; r < 16; ++r) t.v[r] = (r / 8) * 16 + k * 8 + r % 8;
  return t;
}
inline __m512i index_vector(const TransposeIndex& t) {
  return _mm512_loadu_si512(static_cast<const void*>(t.v));
}

// One block of 16 rows into a panel: a[i] holds the block's 32 unsigned codes of rows 2i and
// 2i + 1 ([row 2i | row 2i + 1], weight order); `out` receives 8 vectors, run k (codes 4k..4k+3)
// of every row.
inline void store_runs(const __m512i (&a)[8], uint8_t* out) {
  static constexpr TransposeIndex kStage1[2] = {stage1_index(0), stage1_index(1)};
  static constexpr TransposeIndex kStage2[2] = {stage2_index(0), stage2_index(1)};
  static constexpr TransposeIndex kStage3[2] = {stage3_index(0), stage3_index(1)};
  __m512i b[4][2], c[2][2][2];
  for (int h = 0; h < 2; ++h) {
    const __m512i idx = index_vector(kStage1[h]);
    for (int i = 0; i < 4; ++i) b[i][h] = _mm512_permutex2var_epi32(a[2 * i], idx, a[2 * i + 1]);
  }
  for (int m = 0; m < 2; ++m) {
    const __m512i idx = index_vector(kStage2[m]);
    for (int j = 0; j < 2; ++j) {
      for (int h = 0; h < 2; ++h) {
        c[j][h][m] = _mm512_permutex2var_epi32(b[2 * j][h], idx, b[2 * j + 1][h]);
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    const __m512i idx = index_vector(kStage3[k]);
    for (int h = 0; h < 2; ++h) {
      for (int m = 0; m < 2; ++m) {
        const int run = h * 4 + 2 * m + k;
        _mm512_storeu_si512(out + run * 64, _mm512_permutex2var_epi32(c[0][h][m], idx, c[1][h][m]));
      }
    }
  }
}

// What a format's finish knows of one token's activations for one block.
struct BlockActs {
  __m512 dx;              // the block's activation scale, in every lane
  int32_t xs;             // the sum of its 32 activation quants
  const int32_t* halves;  // with two sums per block: the sums of its first and last 16
};

// Panels of up to 16 rows each over whole activation groups, one after another in one buffer.
template <typename F>
struct Panels {
  uint8_t* codes;  // per panel: [blocks][8 runs][16 rows][4 codes]
  float* side;     // per panel: [blocks][F::kSide][16 rows]
  int64_t groups;

  int64_t blocks() const { return groups * kActGroupBlocks; }
  uint8_t* codes_of(int i) const { return codes + i * blocks() * kPanelBlockBytes; }
  float* side_of(int i) const { return side + i * blocks() * F::kSide * kPanelRows; }
  // Panel i alone.
  Panels one(int i) const { return {codes_of(i), side_of(i), groups}; }
};

// Rows [r0, r0 + rows) of `list` (n weights each) into panel i.
template <typename F>
void pack_panel(const tiles::RowList& list, int64_t r0, int rows, int64_t n, const Panels<F>& p,
                int i) {
  uint8_t* codes = p.codes_of(i);
  float* side = p.side_of(i);
  constexpr int64_t kGroupBytes = F::kGroupBlocks * static_cast<int64_t>(sizeof(typename F::Block));
  const int64_t blocks = n / (kQK * kActGroupBlocks / F::kGroupBlocks);
  const uint8_t* base[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) base[r] = r < rows ? list.row(r0 + r) : nullptr;
  for (int64_t g = 0; g < p.groups; ++g) {
    const uint8_t* at[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) at[r] = base[r] ? base[r] + g * kGroupBytes : nullptr;
    const auto valid =
        static_cast<int>(std::min<int64_t>(F::kGroupBlocks, blocks - g * F::kGroupBlocks));
    F::pack_group(at, valid, codes + g * kActGroupBlocks * kPanelBlockBytes,
                  side + g * kActGroupBlocks * F::kSide * kPanelRows);
  }
}

// The 4 activation quants at s in every lane, as a broadcast load: a separate vpbroadcastd keeps
// vpdpbusd at its full rate, where a broadcast folded into its memory operand halves it (on Zen
// 5), and a load into a general register first costs a transfer between register files.
using AliasedInt32 [[gnu::may_alias, gnu::aligned(1)]] = int32_t;
inline __m512i broadcast_quads(const uint8_t* s) {
  return _mm512_set1_epi32(*reinterpret_cast<const AliasedInt32*>(s));
}

// Outputs of T tokens (activation rows x + t * ldx) against P panels: y[t * ldy + r] for the
// panels' first `rows` rows (the last panel may be partial). Each broadcast of activation quants
// meets the P panels' codes.
//
// For two sums per block, `halves` holds each token's activation quant sums per 16
// (halves_of), hld int32 apart from token to token.
template <typename F, int P, int T>
void panel_tokens(const Panels<F>& p, int rows, const uint8_t* x, size_t ldx, const int32_t* halves,
                  size_t hld, float* y, size_t ldy) {
  constexpr int S = F::kSums;
  __m512 acc[P][T][kActGroupBlocks];
  for (int i = 0; i < P; ++i) {
    for (int t = 0; t < T; ++t) {
      for (int l = 0; l < kActGroupBlocks; ++l) acc[i][t][l] = _mm512_setzero_ps();
    }
  }
  const uint8_t* codes[P];
  const float* side[P];
  for (int i = 0; i < P; ++i) {
    codes[i] = p.codes_of(i);
    side[i] = p.side_of(i);
  }
  for (int64_t g = 0; g < p.groups; ++g) {
    const uint8_t* xg[T];
    for (int t = 0; t < T; ++t) xg[t] = x + t * ldx + g * kActGroupBytes;
#pragma GCC unroll 8
    for (int k = 0; k < kActGroupBlocks; ++k) {
      const int lane = act_lane(k);
      const int64_t block = g * kActGroupBlocks + k;
      int32_t xs[T];
      __m512i isum[P][T][S];
      for (int t = 0; t < T; ++t) {
        xs[t] = reinterpret_cast<const int32_t*>(xg[t] + kActSumsOffset)[lane];
        for (int h = 0; h < S; ++h) {
          const int32_t sum = S == 1 ? xs[t] : halves[t * hld + 2 * block + h];
          const __m512i start = _mm512_set1_epi32(F::start(sum));
          for (int i = 0; i < P; ++i) isum[i][t][h] = start;
        }
      }
#pragma GCC unroll 8
      for (int run = 0; run < 8; ++run) {
        __m512i w[P];
        for (int i = 0; i < P; ++i) {
          w[i] = _mm512_load_si512(codes[i] + block * kPanelBlockBytes + run * 64);
        }
        const int64_t at = act_quant_offset(k, 4 * run);
        for (int t = 0; t < T; ++t) {
          const __m512i quads = broadcast_quads(xg[t] + at);
          for (int i = 0; i < P; ++i) {
            __m512i& sum = isum[i][t][S == 2 && run >= 4 ? 1 : 0];
            sum = _mm512_dpbusd_epi32(sum, w[i], quads);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m512 dx =
            _mm512_set1_ps(reinterpret_cast<const float*>(xg[t] + kActScalesOffset)[lane]);
        for (int i = 0; i < P; ++i) {
          const float* s = side[i] + block * F::kSide * kPanelRows;
          const BlockActs acts{dx, xs[t], S == 2 ? halves + t * hld + 2 * block : nullptr};
          acc[i][t][lane] = F::finish(s, isum[i][t], acts, acc[i][t][lane]);
        }
      }
    }
  }
  // hsum's tree (avx2_util.h), lane by lane: (l0 + l4) + (l2 + l6), then (l1 + l5) + (l3 + l7).
  for (int i = 0; i < P; ++i) {
    const __mmask16 keep = first_lanes(std::clamp(rows - i * kPanelRows, 0, kPanelRows));
    for (int t = 0; t < T; ++t) {
      const __m512(&a)[kActGroupBlocks] = acc[i][t];
      const __m512 even = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6]));
      const __m512 odd = _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7]));
      _mm512_mask_storeu_ps(y + t * ldy + i * kPanelRows, keep, _mm512_add_ps(even, odd));
    }
  }
}

// panel_tokens for nt <= T tokens.
template <typename F, int P, int T>
void panel_tail(const Panels<F>& p, int rows, const uint8_t* x, size_t ldx, const int32_t* halves,
                size_t hld, int64_t nt, float* y, size_t ldy) {
  if constexpr (T > 0) {
    if (nt == T) {
      panel_tokens<F, P, T>(p, rows, x, ldx, halves, hld, y, ldy);
    } else {
      panel_tail<F, P, T - 1>(p, rows, x, ldx, halves, hld, nt, y, ldy);
    }
  }
}

// The sums of each block's first and last 16 activation quants, [block][2], for `blocks` blocks
// of one activation row (act_layout.h).
inline void halves_of(const uint8_t* x, int64_t blocks, int32_t* out) {
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < blocks; ++b) {
    for (int h = 0; h < 2; ++h) {
      // Unsigned q + 128, summed in two 64-bit lanes, then the offset taken off.
      const auto* at = reinterpret_cast<const __m128i*>(x + act_quant_offset(b, 16 * h));
      const __m128i sad =
          _mm_sad_epu8(_mm_xor_si128(_mm_loadu_si128(at), flip), _mm_setzero_si128());
      out[2 * b + h] =
          _mm_cvtsi128_si32(_mm_add_epi64(sad, _mm_unpackhi_epi64(sad, sad))) - 16 * 128;
    }
  }
}

// A product of nt >= kPanelMinTokens tokens through panels. Kept out of line: inlined into
// panel_gemm, its bulk slowed the one-token tiles' loop there by about a tenth.
template <typename F>
[[gnu::noinline]] void panel_products(int64_t n, const tiles::RowList& list, int64_t nr,
                                      const void* x, size_t ldx, int64_t nt, float* y, size_t ldy) {
  const int64_t groups = (n / kQK + kActGroupBlocks - 1) / kActGroupBlocks;
  const int64_t blocks = groups * kActGroupBlocks;
  const auto code_bytes = static_cast<size_t>(kPanelSet * blocks * kPanelBlockBytes);
  const auto side_floats = static_cast<size_t>(kPanelSet * blocks * F::kSide * kPanelRows);
  const int64_t block = std::max<int64_t>(
      kPanelMinTokens, static_cast<int64_t>(kPanelActBytes / ldx) / kPanelTokens * kPanelTokens);
  // Two sums per block: each token's sums per 16 quants, made once per token block.
  const auto hld = static_cast<size_t>(2 * blocks);
  const size_t half_ints = F::kSums == 2 ? hld * static_cast<size_t>(std::min(block, nt)) : 0;
  AlignedBuffer buffer(code_bytes + side_floats * sizeof(float) + half_ints * sizeof(int32_t));
  auto* codes = static_cast<uint8_t*>(buffer.data());
  auto* side = reinterpret_cast<float*>(codes + code_bytes);
  auto* halves = reinterpret_cast<int32_t*>(side + side_floats);
  const Panels<F> panels{codes, side, groups};
  const auto* xb = static_cast<const uint8_t*>(x);
  constexpr int64_t kSetRows = kPanelSet * kPanelRows;
  // Tokens go in blocks whose activations stay in L2 while every panel meets them; each block
  // repacks the panels, which costs far less than streaming the activations from L3 per panel.
  for (int64_t b0 = 0; b0 < nt; b0 += block) {
    const int64_t b1 = std::min(nt, b0 + block);
    if constexpr (F::kSums == 2) {
      for (int64_t t = b0; t < b1; ++t) halves_of(xb + t * ldx, blocks, halves + (t - b0) * hld);
    }
    for (int64_t r0 = 0; r0 < nr; r0 += kSetRows) {
      const int rows = static_cast<int>(std::min(kSetRows, nr - r0));
      const int used = (rows + kPanelRows - 1) / kPanelRows;
      for (int i = 0; i < used; ++i) {
        pack_panel<F>(list, r0 + i * kPanelRows, std::min(kPanelRows, rows - i * kPanelRows), n,
                      panels, i);
      }
      for (int64_t t0 = b0; t0 < b1; t0 += kPanelTokens) {
        const int64_t tt = std::min<int64_t>(kPanelTokens, b1 - t0);
        const uint8_t* xt = xb + t0 * ldx;
        const int32_t* ht = halves + (t0 - b0) * hld;
        float* yt = y + t0 * ldy + r0;
        if (used == kPanelSet) {
          panel_tail<F, kPanelSet, kPanelTokens>(panels, rows, xt, ldx, ht, hld, tt, yt, ldy);
          continue;
        }
        // The last rows of the product: their panels one at a time.
        for (int i = 0; i < used; ++i) {
          panel_tail<F, 1, kPanelTokens>(panels.one(i), std::min(kPanelRows, rows - i * kPanelRows),
                                         xt, ldx, ht, hld, tt, yt + i * kPanelRows, ldy);
        }
      }
    }
  }
}

// The gemm of a panel format: panels for products of kPanelMinTokens tokens or more, the tile
// engine's gemm (Fallback) below that. Inlined into the kernel-table entries, so that the
// one-token path compiles as it would without panels (contiguous rows known as such).
template <typename F, tiles::RowsGemmFn Fallback>
[[gnu::always_inline]] inline void panel_gemm(int64_t n, const tiles::RowList& list, int64_t nr,
                                              const void* x, size_t ldx, int64_t nt, float* y,
                                              size_t ldy) {
  if (nt < kPanelMinTokens) {
    Fallback(n, list, nr, x, ldx, nt, y, ldy);
  } else {
    panel_products<F>(n, list, nr, x, ldx, nt, y, ldy);
  }
}

// dot, gemm and gemm_gather of a type: the tile engine Tiles (one token with up to 4 scattered
// rows a tile, a few tokens in tiles of 2 rows x 4 tokens, the shape that ran fastest:
// docs/benchmarks.md) below kPanelMinTokens tokens, format P's panels from there.
template <typename Tiles, typename P>
void set_panel_kernels(WeightKernels& k) {
  tiles::set_tile_kernels<Tiles, panel_gemm<P, tiles::gemm_by_tokens<Tiles, 4, 2, 4>>>(k);
}

}  // namespace hearth::cpu::avx512
