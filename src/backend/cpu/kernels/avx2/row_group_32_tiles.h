// The products over row groups of the 32-weight block types Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL
// (kernels/row_groups.h) with 256-bit vectors, for the AVX2 and the AVX-VNNI tables. Each 32-bit
// lane is a row; a group column (one block of each of 16 rows) is two halves of 8 rows, bytes
// 0-31 and 32-63 of each code vector. A code vector's low and high nibbles meet the activation
// quads broadcast to every lane, and each block's integer sum is finished per token by one FMA,
// as the scalar reference (generic/row_groups_32.cc) does, so every level gives the same bits.
//
// Dp is the 8-bit product of the level: avx2::MaddAvx2 (block_tiles.h), whose vpmaddubsw adds
// pairs in saturating int16, or a VnniDp (vnni_weights.h), whose vpdpbusd adds quads in int32.
// Under MaddAvx2 the int16 stage bounds what a chain may hold: Q4's nibbles (16 products of at
// most 15 * 127 per lane) sum in one chain, Q5's codes in two (one per nibble half), and IQ4_NL's
// table values, too large as unsigned bytes, meet the activations as |t| against x sign(t), each
// product widened on its own. VNNI has no int16 stage: every type takes its unsigned codes u
// (group_offset_shift) and the offset comes off per block from the activations' sums.
//
// Instantiate only with a Dp from the caller's anonymous namespace (see quant_tiles.h). Include
// only from files compiled with AVX2/FMA/F16C.
#pragma once

#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/kernels/row_groups.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_tiles.h"
#include "backend/cpu/kernels/avx2/row_group_columns.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

template <typename Dp, typename Group>
struct Group32Tiles {
  static constexpr bool kVnni = requires(__m256i v) { Dp::dot(v, v, v); };
  static constexpr bool kMin = requires(const Group& g) { g.m; };
  static constexpr bool kFifthBits = requires(const Group& g) { g.high; };
  static constexpr bool kTable = std::is_same_v<Group, GroupIQ4_NL>;
  // How the integer sums hold the codes' offset: under MaddAvx2, IQ4_NL's signed values need none.
  static constexpr int kOffsetShift = kTable && !kVnni ? -1 : group_offset_shift<Group>();
  // The activation offsets, evaluated at compile time (see row_groups.h).
  static constexpr RowGroupActOffsets kAct = row_group_act_offsets();

  // Half h of code vector w as bytes to multiply: the low nibbles (weights 4 w + i) and the high
  // ones (16 + 4 w + i), with Q5's fifth bits joined at bit 4 and IQ4_NL's nibbles looked up
  // (the table plus 128 under VNNI, the signed table otherwise).
  struct Codes {
    __m256i low, high;
  };
  static Codes codes(const Group& g, int w, int h) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.codes[w] + 32 * h));
    Codes c{low_nibbles(v), high_nibbles(v)};
    if constexpr (kTable) {
      __m256i table = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
      if constexpr (kVnni) table = _mm256_xor_si256(table, _mm256_set1_epi8(-128));
      c = {_mm256_shuffle_epi8(table, c.low), _mm256_shuffle_epi8(table, c.high)};
    }
    if constexpr (kFifthBits) {
      // Bit w of a row's high bytes is the fifth bit of its low nibbles in vector w, bit 4 + w
      // that of its high nibbles: moved to bit 4 and masked.
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.high + 32 * h));
      const __m256i bit4 = _mm256_set1_epi8(0x10);
      const __m256i low = _mm256_slli_epi16(hb, 4 - w);
      const __m256i high = _mm256_srli_epi16(hb, w);
      c.low = _mm256_or_si256(c.low, _mm256_and_si256(low, bit4));
      c.high = _mm256_or_si256(c.high, _mm256_and_si256(high, bit4));
    }
    return c;
  }

  // One block's running integer sums for one row half and token: int16 chains under MaddAvx2
  // (Q4's in `a` alone, Q5's low nibbles in `a` and high ones in `b`), otherwise int32 sums
  // (VNNI's, in `a` or split, and IQ4_NL's widened signed products under MaddAvx2, in `a`).
  struct Chains {
    __m256i a, b;
  };
  // Split: VNNI's low and high nibbles in chains of their own (`a`, `b`), so that one token
  // does not wait on vpdpbusd's latency; tiles of several tokens have chains enough.
  template <bool Split>
  static void add(const Codes& u, const Codes& abs_u, __m256i xl, __m256i xh, Chains& c) {
    if constexpr (kVnni && Split) {
      c.a = Dp::dot(c.a, u.low, xl);
      c.b = Dp::dot(c.b, u.high, xh);
    } else if constexpr (kVnni) {
      c.a = Dp::dot(Dp::dot(c.a, u.low, xl), u.high, xh);
    } else if constexpr (kTable) {
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i pl = _mm256_maddubs_epi16(abs_u.low, _mm256_sign_epi8(xl, u.low));
      const __m256i ph = _mm256_maddubs_epi16(abs_u.high, _mm256_sign_epi8(xh, u.high));
      c.a = _mm256_add_epi32(
          c.a, _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones)));
    } else if constexpr (kFifthBits) {
      c.a = _mm256_add_epi16(c.a, _mm256_maddubs_epi16(u.low, xl));
      c.b = _mm256_add_epi16(c.b, _mm256_maddubs_epi16(u.high, xh));
    } else {
      c.a = _mm256_add_epi16(
          c.a, _mm256_add_epi16(_mm256_maddubs_epi16(u.low, xl), _mm256_maddubs_epi16(u.high, xh)));
    }
  }
  // The block's exact integer dot product of codes and quants, before the offset.
  template <bool Split>
  static __m256i dot(const Chains& c) {
    if constexpr (kVnni && Split) {
      return _mm256_add_epi32(c.a, c.b);
    } else if constexpr (kVnni || kTable) {
      return c.a;
    } else if constexpr (kFifthBits) {
      const __m256i ones = _mm256_set1_epi16(1);
      return _mm256_add_epi32(_mm256_madd_epi16(c.a, ones), _mm256_madd_epi16(c.b, ones));
    } else {
      return _mm256_madd_epi16(c.a, _mm256_set1_epi16(1));
    }
  }

  // Both row halves: each activation broadcast meets 16 rows.
  static constexpr int H = 2;

  // Adds block k (of its activation group, at xb[t]) of group column gc to the running sums of
  // tokens [0, T): sum[h][t] and, for the types with a min, mins. codes_of(w, h) gives half h of
  // the column's code vector w, as codes() does. Without WithMins the mins are left to add_mins.
  template <int T, bool WithMins, typename CodesOf>
  [[gnu::always_inline]] static inline void block(const Group& gc, int k,
                                                  const uint8_t* const (&xb)[T],
                                                  __m256 (&sum)[H][T], __m256 (&mins)[H][T],
                                                  const CodesOf& codes_of) {
    Chains c[H][T];
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) c[h][t] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    }
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      Codes u[H], abs_u[H] = {};
      for (int h = 0; h < H; ++h) {
        u[h] = codes_of(w, h);
        if constexpr (kTable && !kVnni) {
          abs_u[h] = {_mm256_abs_epi8(u[h].low), _mm256_abs_epi8(u[h].high)};
        }
      }
      for (int t = 0; t < T; ++t) {
        const uint8_t* q = xb[t] + kAct.quant[k] + 4 * w;
        const __m256i xl = broadcast32(q), xh = broadcast32(q + 32);
        for (int h = 0; h < H; ++h) add<T == 1>(u[h], abs_u[h], xl, xh, c[h][t]);
      }
    }
    for (int t = 0; t < T; ++t) {
      float dx;
      int32_t sx;
      std::memcpy(&dx, xb[t] + kAct.scale[k], sizeof dx);
      std::memcpy(&sx, xb[t] + kAct.sum[k], sizeof sx);
      const __m256 vdx = _mm256_set1_ps(dx);
      for (int h = 0; h < H; ++h) {
        __m256i exact = dot<T == 1>(c[h][t]);
        if constexpr (kMin && WithMins) {
          add_min(gc, h, dx, sx, mins[h][t]);
        } else if constexpr (!kMin && kOffsetShift >= 0) {
          exact = _mm256_sub_epi32(exact, _mm256_set1_epi32(sx * (1 << kOffsetShift)));
        }
        const __m256 d = load_f16x8(gc.d + 8 * h);
        sum[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(d, vdx), _mm256_cvtepi32_ps(exact), sum[h][t]);
      }
    }
  }

  // A type with a min: mins + m (dx sx), the min term of one block, row half and token.
  static void add_min(const Group& gc, int h, float dx, int32_t sx, __m256& mins) {
    const __m256 m = load_f16x8(gc.m + 8 * h);
    mins = _mm256_fmadd_ps(m, _mm256_set1_ps(dx * static_cast<float>(sx)), mins);
  }
  // The min terms of every block, for tokens x[0..T): a chain of their own, so a tile can sum
  // them after its integer products, with fewer registers live.
  template <int T>
  static void add_mins(int64_t nb, const Group* g, const uint8_t* x, size_t ldx,
                       __m256 (&mins)[H][T]) {
    for (int64_t c = 0; c < nb; ++c) {
      const uint8_t* xb = x + c / kActGroupBlocks * kActGroupBytes;
      const int k = static_cast<int>(c % kActGroupBlocks);
      for (int t = 0; t < T; ++t) {
        float dx;
        int32_t sx;
        std::memcpy(&dx, xb + t * ldx + kAct.scale[k], sizeof dx);
        std::memcpy(&sx, xb + t * ldx + kAct.sum[k], sizeof sx);
        for (int h = 0; h < H; ++h) add_min(g[c], h, dx, sx, mins[h][t]);
      }
    }
  }

  template <int T>
  static void store(const __m256 (&sum)[H][T], const __m256 (&mins)[H][T], float* y, size_t ldy) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        _mm256_storeu_ps(y + t * ldy + 8 * h,
                         kMin ? _mm256_add_ps(sum[h][t], mins[h][t]) : sum[h][t]);
      }
    }
  }

  // One token against a whole group over nb blocks: y[r], r counted from the group's first row.
  // The token streams the
  // weights from DRAM: it takes whole activation groups (8 blocks) a step, their offsets
  // constants and their bytes prefetched ahead in one burst, as the 512-bit kernels do
  // (avx512/row_groups_32_avx512.cc).
  static void one_token(int64_t nb, const Group* g, const uint8_t* x, float* y) {
    __m256 sum[H][1] = {}, mins[H][1] = {};
    int64_t c = 0;
    for (; c + kActGroupBlocks <= nb; c += kActGroupBlocks) {
      tiles::prefetch_lines<kActGroupBlocks * sizeof(Group)>(reinterpret_cast<const char*>(g + c) +
                                                             tiles::kStreamAhead);
      const uint8_t* xb[1] = {x + c / kActGroupBlocks * kActGroupBytes};
#pragma GCC unroll 8
      for (int k = 0; k < kActGroupBlocks; ++k) {
        const Group& gc = g[c + k];
        block<1, true>(gc, k, xb, sum, mins, [&](int w, int h) { return codes(gc, w, h); });
      }
    }
    for (; c < nb; ++c) {
      const Group& gc = g[c];
      const uint8_t* xb[1] = {x + c / kActGroupBlocks * kActGroupBytes};
      block<1, true>(gc, static_cast<int>(c % kActGroupBlocks), xb, sum, mins,
                     [&](int w, int h) { return codes(gc, w, h); });
    }
    store<1>(sum, mins, y, 0);
  }

  // Several tokens meet each group's codes many times: they are unpacked once per group, the
  // codes() of (block c, half h, vector w) as vectors 16 c + 8 h + 2 w (low) and the one after it
  // (high) of `bytes`, and each tile of tokens reads them from there.
  static void unpack(int64_t nb, const Group* g, uint8_t* bytes) {
    auto* out = reinterpret_cast<__m256i*>(bytes);
    for (int64_t c = 0; c < nb; ++c) {
      for (int h = 0; h < 2; ++h) {
        for (int w = 0; w < 4; ++w) {
          const Codes u = codes(g[c], w, h);
          _mm256_storeu_si256(out + 16 * c + 8 * h + 2 * w, u.low);
          _mm256_storeu_si256(out + 16 * c + 8 * h + 2 * w + 1, u.high);
        }
      }
    }
  }
  // Tokens x[0..T) against one group over nb blocks: y[t * ldy + r]. codes_of(c, w, h) gives
  // block c's codes().
  template <int T, typename CodesOf>
  static void tile(int64_t nb, const Group* g, const uint8_t* x, size_t ldx, float* y, size_t ldy,
                   const CodesOf& codes_of) {
    __m256 sum[H][T] = {}, mins[H][T] = {};
    for (int64_t c = 0; c < nb; ++c) {
      const uint8_t* xb[T];
      for (int t = 0; t < T; ++t) xb[t] = x + t * ldx + c / kActGroupBlocks * kActGroupBytes;
      block<T, false>(g[c], static_cast<int>(c % kActGroupBlocks), xb, sum, mins,
                      [&](int w, int h) { return codes_of(c, w, h); });
    }
    if constexpr (kMin) add_mins<T>(nb, g, x, ldx, mins);
    store<T>(sum, mins, y, ldy);
  }

  // gemm_row_groups, with tiles of up to MaxTokens tokens; prompts read the codes unpacked.
  template <int MaxTokens>
  static void gemm(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                   int64_t nt, float* y, size_t ldy) {
    const int64_t nb = n / kQK;
    const auto* xb = static_cast<const uint8_t*>(x);
    const auto group = [&](int64_t gi) {
      return reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
    };
    std::vector<uint8_t> buffer(unpack_codes(nt) ? static_cast<size_t>(nb) * 16 * sizeof(__m256i)
                                                 : 0);
    uint8_t* const bytes = buffer.data();
    const auto* unpacked = reinterpret_cast<const __m256i*>(bytes);
    for_each_unpacked_tile<MaxTokens>(
        ng, nt,
        [&](int64_t gi, int64_t t, auto tokens) {
          constexpr int T = decltype(tokens)::value;
          const Group* g = group(gi);
          if constexpr (T == 1) {
            one_token(nb, g, xb + t * ldx, y + t * ldy + gi * kGroupRows);
          } else {
            tile<T>(nb, g, xb + t * ldx, ldx, y + t * ldy + gi * kGroupRows, ldy,
                    [&](int64_t c, int wq, int h) { return codes(g[c], wq, h); });
          }
        },
        [&](int64_t gi) { unpack(nb, group(gi), bytes); },
        [&](int64_t gi, int64_t t, auto tokens) {
          tile<decltype(tokens)::value>(
              nb, group(gi), xb + t * ldx, ldx, y + t * ldy + gi * kGroupRows, ldy,
              [&](int64_t c, int wq, int h) {
                const __m256i* v = unpacked + 16 * c + 8 * h + 2 * wq;
                return Codes{_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1)};
              });
        });
  }
};

// Sets gemm_row_groups of the five 32-weight types, with tiles of up to MaxTokens tokens.
template <typename Dp, int MaxTokens>
void set_group_32_kernels(Kernels& k) {
  k.q4_0.gemm_row_groups = Group32Tiles<Dp, GroupQ4_0>::template gemm<MaxTokens>;
  k.q4_1.gemm_row_groups = Group32Tiles<Dp, GroupQ4_1>::template gemm<MaxTokens>;
  k.q5_0.gemm_row_groups = Group32Tiles<Dp, GroupQ5_0>::template gemm<MaxTokens>;
  k.q5_1.gemm_row_groups = Group32Tiles<Dp, GroupQ5_1>::template gemm<MaxTokens>;
  k.iq4_nl.gemm_row_groups = Group32Tiles<Dp, GroupIQ4_NL>::template gemm<MaxTokens>;
}

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
