// The row-panel engine for prompt products: 16 weight rows, one per 32-bit lane, against many
// tokens. The formats are in quant_panels.h (the 32-weight block types) and kquant_panels.h (the
// super-block types); the vector widths in panel_ymm.h (AVX2 and AVX-VNNI, 8 rows a vector) and
// avx512/panel_zmm.h (16 rows a vector).
//
// The tile engines (group_tiles.h) leave each block's sum spread over several int32 lanes and
// gather it with horizontal adds, about a shuffle for every two 8-bit products. Here 16 rows are
// first repacked into a panel, once per product and token block and reused by every token: for
// each block of 32 weights and each run of 4 codes, 64 bytes hold those 4 codes of all 16 rows,
// so an 8-bit product against the token's 4 activation quants broadcast to every lane adds them
// straight into each row's lane. Eight products give a block's exact integer sum for 16 rows,
// with no reduction at all.
//
// Every output goes through the tile engines' float operations in their order: per block, the
// format's finish (the same rounding steps as its tile finish) into the accumulator of the
// block's act_lane, and the 8 lane accumulators summed at the end in hsum's tree. So a prompt
// token's output equals the one-token matvec's bit for bit (batch invariance), and the integer
// sums, being exact, may be formed in any order.
//
// A format F gives
//   Block, kGroupBlocks (blocks of F::Block per activation group: 8, or 1 super-block);
//   kSide: floats of 16 rows per block of 32 weights that finish reads (scales, mins);
//   kMaxCode: its largest unsigned code (what bounds 16-bit sums of products);
//   pack_group<V>(rows, valid, codes, side): one activation group of 16 rows (rows[r] the
//     group's first block, null past the matrix; blocks from `valid` on are zero padding) into
//     8 blocks of codes (V::store_runs) and side data;
//   kSums: integer sums per block and row, 1, or 2 for formats with a scale per 16 weights
//     (runs 0-3 and 4-7);
//   start(s): the initial int32 sum over weights whose activation quants sum to s (the block's
//     32 with one sum, each 16 with two);
//   finish<V>(side, sums, acts, acc): acc plus the block's term, as the tile engine rounds it.
// A vector width V gives the vector types and operations the formats and the engine use, its
// product (dp: vpdpbusd into int32 where kWindow<F> is 0; else pairs, add16 and widen: maddubs
// into int16 sums widened every kWindow<F> runs), and
// kPanels (panels per pass) and kTokens<F> (tokens per pass), chosen to keep the sums in
// registers.
//
// The panels need a buffer of one pass's rows' codes (one byte per weight) and side data per
// product; products of few tokens, where repacking would not pay, keep the tile engines. Include
// only from files compiled with the avx2/ flags or more.
#pragma once

#include <algorithm>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/tile_set.h"
#include "core/aligned_buffer.h"
#include "core/dtype.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

inline constexpr int kPanelRows = 16;
// Bytes of one block of 32 weights in a panel: 8 runs of 4 codes for 16 rows.
inline constexpr int64_t kPanelBlockBytes = kQK * kPanelRows;
// Below this many tokens a product keeps the tile engines: repacking a block costs about as much
// as computing it for ten tokens, and at 8 tokens the two run alike.
inline constexpr int64_t kPanelMinTokens = 16;
// Activation bytes of the tokens that meet each panel in turn (panel_products).
inline constexpr size_t kPanelActBytes = 384 * 1024;

// What a format's finish knows of one token's activations for one block, in vector width V.
template <typename V>
struct BlockActs {
  typename V::F dx;       // the block's activation scale, in every lane
  int32_t xs;             // the sum of its 32 activation quants
  int32_t halves[2];      // with two sums per block: the sums of its first and last 16
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
template <typename F, typename V>
void pack_panel(const RowList& list, int64_t r0, int rows, int64_t n, const Panels<F>& p, int i) {
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
    F::template pack_group<V>(at, valid, codes + g * kActGroupBlocks * kPanelBlockBytes,
                              side + g * kActGroupBlocks * F::kSide * kPanelRows);
  }
}

// The 4 activation quants at s, as one int32 (broadcast into every lane by the widths).
using AliasedInt32 [[gnu::may_alias, gnu::aligned(1)]] = int32_t;
inline int32_t quads_at(const uint8_t* s) { return *reinterpret_cast<const AliasedInt32*>(s); }

// Outputs of T tokens (activation rows x + t * ldx) against P panels: y[t * ldy + r] for the
// panels' first `rows` rows (the last panel may be partial). Each panel is kPanelRows / kLanes
// vectors of V ("units"); each broadcast of activation quants meets every unit's codes.
template <typename F, typename V, int P, int T>
void panel_tokens(const Panels<F>& p, int rows, const uint8_t* x, size_t ldx, float* y,
                  size_t ldy) {
  using VF = typename V::F;
  using VI = typename V::I;
  constexpr int S = F::kSums;
  constexpr int H = kPanelRows / V::kLanes;  // units per panel
  constexpr int U = P * H;
  // Runs summed in 16 bits before each widening (0: the product sums into int32 itself).
  constexpr int W = V::template kWindow<F>;
  static_assert(W == 0 || (8 / S) % W == 0, "a window never spans two sums");
  VF acc[U][T][kActGroupBlocks];
  for (int u = 0; u < U; ++u) {
    for (int t = 0; t < T; ++t) {
      for (int l = 0; l < kActGroupBlocks; ++l) acc[u][t][l] = V::zero();
    }
  }
  const uint8_t* codes[U];
  const float* side[U];
  for (int u = 0; u < U; ++u) {
    codes[u] = p.codes_of(u / H) + (u % H) * V::kLanes * 4;
    side[u] = p.side_of(u / H) + (u % H) * V::kLanes;
  }
  for (int64_t g = 0; g < p.groups; ++g) {
    const uint8_t* xg[T];
    for (int t = 0; t < T; ++t) xg[t] = x + t * ldx + g * kActGroupBytes;
    // Not unrolled: unrolled, GCC hoists the products of later blocks ahead of the sums that
    // consume them and spills the sums (the block's runs below are unrolled).
    for (int k = 0; k < kActGroupBlocks; ++k) {
      const int lane = act_lane(k);
      const int64_t block = g * kActGroupBlocks + k;
      int32_t xs[T], start[T][S];
      // (Windowed products set each sum at its first window; the braces only spare GCC's
      // may-be-uninitialized warning.)
      VI isum[U][T][S]{};
      [[maybe_unused]] VI part[U][T];
      for (int t = 0; t < T; ++t) {
        xs[t] = act_block_sum(xg[t], lane, F::kGroupBlocks == 1);
        for (int h = 0; h < S; ++h) {
          start[t][h] = F::start(S == 1 ? xs[t] : act_half_sum(xg[t], lane, h));
          if constexpr (W == 0) {
            for (int u = 0; u < U; ++u) isum[u][t][h] = V::set1i(start[t][h]);
          }
        }
      }
#pragma GCC unroll 8
      for (int run = 0; run < 8; ++run) {
        const int h = S == 2 && run >= 4 ? 1 : 0;
        VI w[U];
        for (int u = 0; u < U; ++u) w[u] = V::codes(codes[u] + block * kPanelBlockBytes + run * 64);
        const int64_t at = act_quant_offset(k, 4 * run);
        for (int t = 0; t < T; ++t) {
          const VI quads = V::set1i(quads_at(xg[t] + at));
          for (int u = 0; u < U; ++u) {
            if constexpr (W == 0) {
              isum[u][t][h] = V::dp(isum[u][t][h], w[u], quads);
            } else {
              part[u][t] = V::add16(run % W == 0 ? V::zeroi() : part[u][t], V::pairs(w[u], quads));
            }
          }
        }
        if constexpr (W > 0) {
          if ((run + 1) % W == 0) {
            // The first window of a sum starts it.
            const bool first = (run + 1 - W) % (8 / S) == 0;
            for (int u = 0; u < U; ++u) {
              for (int t = 0; t < T; ++t) {
                const VI wide = V::widen(part[u][t]);
                isum[u][t][h] = V::addi(first ? V::set1i(start[t][h]) : isum[u][t][h], wide);
              }
            }
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const VF dx = V::set1(reinterpret_cast<const float*>(xg[t] + kActScalesOffset)[lane]);
        for (int u = 0; u < U; ++u) {
          const float* s = side[u] + block * F::kSide * kPanelRows;
          const BlockActs<V> acts{dx,
                                  xs[t],
                                  {S == 2 ? act_half_sum(xg[t], lane, 0) : 0,
                                   S == 2 ? act_half_sum(xg[t], lane, 1) : 0}};
          acc[u][t][lane] = F::template finish<V>(s, isum[u][t], acts, acc[u][t][lane]);
        }
      }
    }
  }
  // hsum's tree (avx2_util.h), lane by lane: (l0 + l4) + (l2 + l6), then (l1 + l5) + (l3 + l7).
  for (int u = 0; u < U; ++u) {
    const int first_row = (u / H) * kPanelRows + (u % H) * V::kLanes;
    const int count = std::clamp(rows - first_row, 0, V::kLanes);
    for (int t = 0; t < T; ++t) {
      const VF(&a)[kActGroupBlocks] = acc[u][t];
      const VF even = V::add(V::add(a[0], a[4]), V::add(a[2], a[6]));
      const VF odd = V::add(V::add(a[1], a[5]), V::add(a[3], a[7]));
      V::store_first(y + t * ldy + first_row, V::add(even, odd), count);
    }
  }
}

// panel_tokens for nt <= T tokens.
template <typename F, typename V, int P, int T>
void panel_tail(const Panels<F>& p, int rows, const uint8_t* x, size_t ldx, int64_t nt, float* y,
                size_t ldy) {
  if constexpr (T > 0) {
    if (nt == T) {
      panel_tokens<F, V, P, T>(p, rows, x, ldx, y, ldy);
    } else {
      panel_tail<F, V, P, T - 1>(p, rows, x, ldx, nt, y, ldy);
    }
  }
}

// A product of nt >= kPanelMinTokens tokens through panels. Kept out of line: inlined into
// panel_gemm, its bulk slowed the one-token tiles' loop there by about a tenth.
template <typename F, typename V>
[[gnu::noinline]] void panel_products(int64_t n, const RowList& list, int64_t nr, const void* x,
                                      size_t ldx, int64_t nt, float* y, size_t ldy) {
  constexpr int kSet = V::kPanels;
  constexpr int kTokens = V::template kTokens<F>;
  const int64_t groups = (n / kQK + kActGroupBlocks - 1) / kActGroupBlocks;
  const int64_t blocks = groups * kActGroupBlocks;
  const auto code_bytes = static_cast<size_t>(kSet * blocks * kPanelBlockBytes);
  const auto side_floats = static_cast<size_t>(kSet * blocks * F::kSide * kPanelRows);
  const int64_t block = std::max<int64_t>(
      kPanelMinTokens, static_cast<int64_t>(kPanelActBytes / ldx) / kTokens * kTokens);
  AlignedBuffer buffer(code_bytes + side_floats * sizeof(float));
  auto* codes = static_cast<uint8_t*>(buffer.data());
  auto* side = reinterpret_cast<float*>(codes + code_bytes);
  const Panels<F> panels{codes, side, groups};
  const auto* xb = static_cast<const uint8_t*>(x);
  constexpr int64_t kSetRows = kSet * kPanelRows;
  // Tokens go in blocks whose activations stay in L2 while every panel meets them; each block
  // repacks the panels, which costs far less than streaming the activations from L3 per panel.
  for (int64_t b0 = 0; b0 < nt; b0 += block) {
    const int64_t b1 = std::min(nt, b0 + block);
    for (int64_t r0 = 0; r0 < nr; r0 += kSetRows) {
      const int rows = static_cast<int>(std::min(kSetRows, nr - r0));
      const int used = (rows + kPanelRows - 1) / kPanelRows;
      for (int i = 0; i < used; ++i) {
        pack_panel<F, V>(list, r0 + i * kPanelRows, std::min(kPanelRows, rows - i * kPanelRows), n,
                         panels, i);
      }
      for (int64_t t0 = b0; t0 < b1; t0 += kTokens) {
        const int64_t tt = std::min<int64_t>(kTokens, b1 - t0);
        const uint8_t* xt = xb + t0 * ldx;
        float* yt = y + t0 * ldy + r0;
        if (used == kSet) {
          panel_tail<F, V, kSet, kTokens>(panels, rows, xt, ldx, tt, yt, ldy);
          continue;
        }
        // The last rows of the product: their panels one at a time.
        for (int i = 0; i < used; ++i) {
          panel_tail<F, V, 1, kTokens>(panels.one(i), std::min(kPanelRows, rows - i * kPanelRows),
                                       xt, ldx, tt, yt + i * kPanelRows, ldy);
        }
      }
    }
  }
}

// The gemm of a panel format: panels for products of kPanelMinTokens tokens or more, the tile
// engine's gemm (Fallback) below that. Inlined into the kernel-table entries, so that the
// one-token path compiles as it would without panels (contiguous rows known as such).
template <typename F, typename V, RowsGemmFn Fallback>
[[gnu::always_inline]] inline void panel_gemm(int64_t n, const RowList& list, int64_t nr,
                                              const void* x, size_t ldx, int64_t nt, float* y,
                                              size_t ldy) {
  if (nt < kPanelMinTokens) {
    Fallback(n, list, nr, x, ldx, nt, y, ldy);
  } else {
    panel_products<F, V>(n, list, nr, x, ldx, nt, y, ldy);
  }
}

// dot, gemm and gemm_gather of a type: the tile engine Tiles (one token with up to 4 scattered
// rows a tile, a few tokens in tiles of 2 rows x 4 tokens, the shape that ran fastest:
// docs/benchmarks.md) below kPanelMinTokens tokens, format F's panels in width V from there.
// Instantiate only with types of the caller's anonymous namespace (see quant_tiles.h).
template <typename Tiles, typename F, typename V>
void set_panel_kernels(WeightKernels& k) {
  set_tile_kernels<Tiles, panel_gemm<F, V, gemm_by_tokens<Tiles, 4, 2, 4>>>(k);
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
