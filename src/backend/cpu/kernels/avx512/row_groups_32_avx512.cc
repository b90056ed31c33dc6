// The products over row groups of the 32-weight block types Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL
// (kernels/row_groups.h) with AVX512-VNNI. One group column is one block of each of 16 rows: its
// four code vectors hold the low nibbles (weights 4 w + i) and high nibbles (16 + 4 w + i) of
// every row, one row per 32-bit lane; each becomes unsigned byte codes (Q5's fifth bits joined at
// bit 4, IQ4_NL's nibbles looked up in its table plus 128) and meets the activation quad broadcast
// in one vpdpbusd. The block's integer sum is then finished per token by one FMA, as the generic
// reference (generic/row_groups_32.cc) does, so both give the same bits.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels/avx512/avx512_kernels.h"
#include "backend/cpu/kernels/avx512/row_group_tiles.h"

namespace hearth::cpu::avx512 {
namespace {

// Code vector w's low and high nibbles as bytes 0..15.
struct Nibbles {
  __m512i low, high;
};
inline Nibbles nibbles(__m512i v) {
  const __m512i mask = _mm512_set1_epi8(0x0f);
  return {_mm512_and_si512(v, mask), _mm512_and_si512(_mm512_srli_epi16(v, 4), mask)};
}

// Q5's fifth bits of code vector w's low nibbles (bit w of the high bytes) and high nibbles (bit
// 4 + w) joined to them at bit 4.
inline void join_fifth_bits(const uint8_t* high, int w, Nibbles& n) {
  const __m512i h = _mm512_loadu_si512(high);
  n.low = join_bit_4(n.low, h, w);
  n.high = join_bit_4(n.high, h, 4 + w);
}

// The unsigned codes u (row_groups.h, group_offset_shift) of code vector w's low and high nibbles.
template <typename Group>
Nibbles codes(const Group& g, int w) {
  Nibbles n = nibbles(_mm512_loadu_si512(g.codes[w]));
  if constexpr (std::is_same_v<Group, GroupIQ4_NL>) {
    const __m512i table = iq4_offset_book();
    return {_mm512_shuffle_epi8(table, n.low), _mm512_shuffle_epi8(table, n.high)};
  }
  if constexpr (requires { g.high; }) join_fifth_bits(g.high, w, n);
  return n;
}

// Adds block k (of its activation group) of one group column gc to the tokens' running sums.
template <int T, typename Group>
[[gnu::always_inline]] inline void block_32(const Group& gc, int k, const uint8_t* xb, size_t ldx,
                                            __m512 (&sum)[T], __m512 (&mins)[T]) {
  constexpr bool kMin = requires(const Group& gr) { gr.m; };
  // The low and high nibbles' sums apart: two chains of vpdpbusd.
  __m512i low[T] = {}, high[T] = {};
#pragma GCC unroll 4
  for (int w = 0; w < 4; ++w) {
    const Nibbles u = codes(gc, w);
    for (int t = 0; t < T; ++t) {
      const uint8_t* q = xb + t * ldx + kAct.quant[k] + 4 * w;
      low[t] = _mm512_dpbusd_epi32(low[t], u.low, broadcast32(q));
      high[t] = _mm512_dpbusd_epi32(high[t], u.high, broadcast32(q + 32));
    }
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.d)));
  for (int t = 0; t < T; ++t) {
    float dx;
    int32_t sx;
    std::memcpy(&dx, xb + t * ldx + kAct.scale[k], sizeof dx);
    std::memcpy(&sx, xb + t * ldx + kAct.sum[k], sizeof sx);
    __m512i dot = _mm512_add_epi32(low[t], high[t]);
    if constexpr (kMin) {
      const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gc.m)));
      mins[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(dx * static_cast<float>(sx)), mins[t]);
    } else {
      dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(sx * (1 << group_offset_shift<Group>())));
    }
    sum[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(dot), sum[t]);
  }
}

// Tokens x[0..T) against one group of 16 rows over nb blocks: y[t * ldy + r]. One token, which
// streams the weights from DRAM, takes whole activation groups (8 blocks, 2-3 KiB) a step, their
// offsets constants and their bytes prefetched ahead in one burst; block by block, each a few
// hundred bytes, it read at 0.7-0.85x of the row layout from DRAM (docs/benchmarks.md). Several
// tokens go block by block: unrolled over 8 blocks, their tiles ran 0.8x.
template <int T, typename Group>
void group_32(int64_t nb, const Group* g, const uint8_t* x, size_t ldx, float* y, size_t ldy) {
  constexpr bool kMin = requires(const Group& gr) { gr.m; };
  __m512 sum[T] = {}, mins[T] = {};
  int64_t c = 0;
  if constexpr (T == 1) {
    for (; c + kActGroupBlocks <= nb; c += kActGroupBlocks) {
      tiles::prefetch_lines<kActGroupBlocks * sizeof(Group)>(reinterpret_cast<const char*>(g + c) +
                                                             tiles::kStreamAhead);
      const uint8_t* xb = x + c / kActGroupBlocks * kActGroupBytes;
#pragma GCC unroll 8
      for (int k = 0; k < kActGroupBlocks; ++k) block_32<T>(g[c + k], k, xb, ldx, sum, mins);
    }
  }
  for (; c < nb; ++c) {
    block_32<T>(g[c], static_cast<int>(c % kActGroupBlocks),
                x + c / kActGroupBlocks * kActGroupBytes, ldx, sum, mins);
  }
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(y + t * ldy, kMin ? _mm512_add_ps(sum[t], mins[t]) : sum[t]);
  }
}

template <typename Group>
struct Kernel32 {
  template <int T>
  struct Tile {
    static void run(int64_t nb, const Group* g, const uint8_t* x, size_t ldx, float* y,
                    size_t ldy) {
      group_32<T, Group>(nb, g, x, ldx, y, ldy);
    }
  };
};

template <typename Group>
void set_32(WeightKernels& k) {
  // Q5's fifth bits cost a join per code vector and tile: tiles of 6 tokens share it further
  // (8 ran slower than 4 for every type here).
  constexpr bool kFifthBits = requires(const Group& g) { g.high; };
  constexpr int kTokens = kFifthBits ? 6 : 4;
  k.gemm_row_groups = gemm_groups<Group, kTokens, Kernel32<Group>::template Tile, kQK>;
}

}  // namespace

void set_row_group_32_kernels(Kernels& k) {
  set_32<GroupQ4_0>(k.q4_0);
  set_32<GroupQ4_1>(k.q4_1);
  set_32<GroupQ5_0>(k.q5_0);
  set_32<GroupQ5_1>(k.q5_1);
  set_32<GroupIQ4_NL>(k.iq4_nl);
}

}  // namespace hearth::cpu::avx512
