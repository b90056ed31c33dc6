// The one-token K-quant axpy (Q4_K, Q6_K) in 8-bit integers, as generic/axpy.cc defines it
// (generic_kernels.h, kAxpyGroup), shared by the AVX2 and AVX-512 tables. The walk over groups
// of 32 active rows and pass 1 (each super-block's int8 coefficients) are here; each ISA plugs in
// its pass 2 (the integer sums, SumsK4_256 / SumsQ6_K_256 below for 256 bits). Every sum is
// exact and the float steps are the same, so all of them give the same bits.
//
// Why integers: the float kernel spends, per 16 weights of a row, a widening, a conversion and an
// FMA, plus the super-block's scales unpacked and multiplied per row; here 4 rows' codes meet
// their 4 coefficients in one 8-bit dot product per 32-bit lane (vpdpbusd, or maddubs + madd),
// after a byte transpose that puts the same column of the 4 rows side by side.
//
// Include only from files compiled with AVX2/FMA/F16C (the avx2/ and avx512/ folders).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/quant_blocks.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/axpy_legacy_int.h"
#include "backend/cpu/kernels/avx2/block_formats_256.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// Pass 1's output for one super-block of a group, per scale unit u (Q4_K: sub-block u of 32
// columns; Q6_K: the 16 columns of scale u): t4[k][u] holds the int8 t of rows 4k..4k+3 side by
// side (row 4k + i in byte i), scale[u] = S, mvals[u] = m (a unit under kAxpyMinScale adds no
// sums), base[u] = the codes' offset times sum_r t_r (Q6_K's codes are stored as q + 32), and
// mins[u] the min term (Q4_K).
struct KCoefs {
  static constexpr int kMaxUnits = 16;
  alignas(64) int32_t t4[generic::kAxpyGroup / 4][kMaxUnits];
  alignas(64) float scale[kMaxUnits];
  alignas(64) float mvals[kMaxUnits];
  alignas(64) int32_t base[kMaxUnits];
  alignas(64) float mins[kMaxUnits];
};

// Per row, the coefficients s of 8 units side by side: s[r][u] for units [8h, 8h + 8).
using UnitRows = float[generic::kAxpyGroup][KCoefs::kMaxUnits];

// Quantizes units [8h, 8h + 8) of s (rows past the group hold zeros) into c, with
// base = offset * sum_r t_r.
inline void quantize_units8(const UnitRows& s, int h, int32_t offset, KCoefs& c) {
  constexpr int G = generic::kAxpyGroup;
  static_assert(G == 32, "the packing below handles 32 coefficients");
  // Within each lane, bytes (4i + r) -> (4r + i): the 4 rows' t of unit i side by side.
  const __m256i transpose4 = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                              0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const int u0 = 8 * h;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 mv = _mm256_setzero_ps();
  for (int r = 0; r < G; ++r)
    mv = _mm256_max_ps(mv, _mm256_andnot_ps(sign, _mm256_load_ps(s[r] + u0)));
  _mm256_store_ps(c.mvals + u0, mv);
  _mm256_store_ps(c.scale + u0, _mm256_div_ps(mv, _mm256_set1_ps(127.0f)));
  // A unit with m < kAxpyMinScale may get inf here and garbage t, but pass 2 skips it.
  const __m256 inv = _mm256_div_ps(_mm256_set1_ps(127.0f), mv);
  __m256i tsum = _mm256_setzero_si256();
  for (int k = 0; k < G / 4; ++k) {
    __m256i t[4];
    for (int i = 0; i < 4; ++i) {
      t[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(s[4 * k + i] + u0), inv));
      tsum = _mm256_add_epi32(tsum, t[i]);
    }
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(t[0], t[1]), _mm256_packs_epi32(t[2], t[3]));
    _mm256_store_si256(reinterpret_cast<__m256i*>(c.t4[k] + u0),
                       _mm256_shuffle_epi8(packed, transpose4));
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(c.base + u0),
                     _mm256_mullo_epi32(tsum, _mm256_set1_epi32(offset)));
}

// 8 bytes as 8 floats, byte i in lane i.
inline __m256 byte_floats(uint64_t bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes))));
}

// Pass 1 of Q4_K: per row s = a * (d * sc) and the min term a * (-dmin * m), per sub-block,
// exactly as the reference forms them.
struct CoefsQ4_K {
  static void make(const IntGroup& g, int64_t off, KCoefs& c) {
    alignas(64) UnitRows s;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 mins = _mm256_setzero_ps();
    for (int r = 0; r < g.count; ++r) {
      const auto* b = reinterpret_cast<const BlockQ4_K*>(g.rows[r] + off);
      const K4ScaleBytes sm = k4_scale_bytes(b->scales);
      uint32_t d_dmin;
      std::memcpy(&d_dmin, &b->d, sizeof d_dmin);
      const __m256 both = _mm256_cvtph_ps(_mm_set1_epi32(static_cast<int>(d_dmin)));
      const __m256 a = _mm256_set1_ps(g.coef[r]);
      _mm256_store_ps(
          s[r], _mm256_mul_ps(a, _mm256_mul_ps(_mm256_moveldup_ps(both), byte_floats(sm.scales))));
      const __m256 neg_dmin = _mm256_xor_ps(_mm256_movehdup_ps(both), sign);
      const __m256 term = _mm256_mul_ps(a, _mm256_mul_ps(neg_dmin, byte_floats(sm.mins)));
      mins = _mm256_add_ps(mins, term);
    }
    for (int r = g.count; r < generic::kAxpyGroup; ++r) _mm256_store_ps(s[r], _mm256_setzero_ps());
    _mm256_store_ps(c.mins, mins);
    quantize_units8(s, 0, 0, c);
  }
};

// Pass 1 of Q6_K: per row s = a * (d * sc) for its 16 scales; codes are stored as q + 32.
struct CoefsQ6_K {
  static void make(const IntGroup& g, int64_t off, KCoefs& c) {
    alignas(64) UnitRows s;
    for (int r = 0; r < g.count; ++r) {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(g.rows[r] + off);
      const __m256 d = _mm256_set1_ps(half_to_float(b->d));
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
      const __m256 a = _mm256_set1_ps(g.coef[r]);
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)));
      _mm256_store_ps(s[r], _mm256_mul_ps(a, _mm256_mul_ps(d, lo)));
      _mm256_store_ps(s[r] + 8, _mm256_mul_ps(a, _mm256_mul_ps(d, hi)));
    }
    for (int r = g.count; r < generic::kAxpyGroup; ++r) {
      _mm256_store_ps(s[r], _mm256_setzero_ps());
      _mm256_store_ps(s[r] + 8, _mm256_setzero_ps());
    }
    quantize_units8(s, 0, -32, c);
    quantize_units8(s, 1, -32, c);
  }
};

// The walk: groups of active rows as the Q4_0 kernel forms them (parts included), and per group
// and super-block pass 1 (F::Coefs) then pass 2 (F::Sums::add(rows, steps, off, c, y): adds the
// super-block's 256 columns into y). The next group's rows are prefetched into L2 a super-block
// at a time while this group computes, as in the Q4_0 kernel, and this group's next super-block
// into L1.
template <typename Block, typename Coefs, typename Sums>
void axpy_kquant_int_parts(int64_t n, const uint8_t* wb, size_t ldw, const int32_t* idx,
                           const float* a, const int64_t* ends, int64_t n_parts, float* y,
                           size_t ldy) {
  constexpr int64_t kB = sizeof(Block);
  const int64_t nb = n / kQK_K;
  IntGroup groups[2];
  IntCursor at;
  next_int_group(wb, ldw, idx, a, ends, n_parts, at, groups[0]);
  prefetch_rows<_MM_HINT_T0>(groups[0].rows, 0, groups[0].count, 0, nb * kB);
  KCoefs c;
  for (int cur = 0; groups[cur].count > 0; cur ^= 1) {
    const IntGroup& g = groups[cur];
    IntGroup& ng = groups[cur ^ 1];
    next_int_group(wb, ldw, idx, a, ends, n_parts, at, ng);
    float* const yg = y + static_cast<size_t>(g.part) * ldy;
    const int steps = (g.count + 3) / 4;
    for (int64_t sb = 0; sb < nb; ++sb) {
      const int64_t off = sb * kB;
      // This group's next super-block into L1 while this one computes: its lines are in L2
      // (or on their way) from the prefetches below one group earlier, and pass 1 reads each
      // row's scales first thing, which otherwise waits on L2 row by row.
      if (sb + 1 < nb) prefetch_rows<_MM_HINT_T0>(g.rows, 0, g.count, off + kB, kB);
      Coefs::make(g, off, c);
      // The next group's super-block into L2, each line it touches once: half its rows after
      // pass 1 and half after pass 2, so that neither pass's loads queue behind all of these
      // misses at once.
      const int first_half = ng.count / 2;
      prefetch_rows<_MM_HINT_T1>(ng.rows, 0, first_half, off, kB);
      Sums::add(g.rows, steps, off, c, yg + sb * kQK_K);
      prefetch_rows<_MM_HINT_T1>(ng.rows, first_half, ng.count, off, kB);
    }
  }
}

// 4 rows' 32 bytes transposed: q[i] holds, in 32-bit lane 4L + k, byte 16L + 4i + k of the 4
// rows (row r in byte r), for 128-bit lanes L = 0, 1.
struct Quads256 {
  __m256i q[4];
};
inline Quads256 quads256(__m256i r0, __m256i r1, __m256i r2, __m256i r3) {
  const __m256i lo01 = _mm256_unpacklo_epi8(r0, r1), hi01 = _mm256_unpackhi_epi8(r0, r1);
  const __m256i lo23 = _mm256_unpacklo_epi8(r2, r3), hi23 = _mm256_unpackhi_epi8(r2, r3);
  return {{_mm256_unpacklo_epi16(lo01, lo23), _mm256_unpackhi_epi16(lo01, lo23),
           _mm256_unpacklo_epi16(hi01, hi23), _mm256_unpackhi_epi16(hi01, hi23)}};
}
inline Quads256 load_quads256(const uint8_t* const* rows, int64_t at) {
  const auto load = [at](const uint8_t* row) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + at));
  };
  return quads256(load(rows[0]), load(rows[1]), load(rows[2]), load(rows[3]));
}

// The 8-bit dot product of AVX2: per 32-bit lane, acc + sum of 4 unsigned codes times 4 int8 t
// (maddubs' int16 pairs cannot saturate: codes are at most 63, |t| at most 127).
struct DpAvx2 {
  static __m256i dot(__m256i acc, __m256i codes, __m256i t) {
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_maddubs_epi16(codes, t), _mm256_set1_epi16(1)));
  }
};

// Adds 32 columns of integer sums into y: acc[i] as quads256 leaves them (column 16L + 4i + k
// in lane L, element k), units u (columns 0-15) and u2 (16-31), which are the same unit for
// Q4_K. y += S * float(sum + base), then the min term where the type has one.
template <bool kMins>
inline void finish32(const __m256i (&acc)[4], const KCoefs& c, int u, int u2, float* y) {
  // Columns 0-7, 8-15 (unit u), 16-23, 24-31 (unit u2).
  const __m256i cols[4] = {_mm256_permute2x128_si256(acc[0], acc[1], 0x20),
                           _mm256_permute2x128_si256(acc[2], acc[3], 0x20),
                           _mm256_permute2x128_si256(acc[0], acc[1], 0x31),
                           _mm256_permute2x128_si256(acc[2], acc[3], 0x31)};
  for (int v = 0; v < 4; ++v) {
    const int unit = v < 2 ? u : u2;
    float* yv = y + 8 * v;
    __m256 out = _mm256_loadu_ps(yv);
    if (c.mvals[unit] >= generic::kAxpyMinScale) {
      const __m256i sum = _mm256_add_epi32(cols[v], _mm256_set1_epi32(c.base[unit]));
      out = _mm256_fmadd_ps(_mm256_set1_ps(c.scale[unit]), _mm256_cvtepi32_ps(sum), out);
    }
    if (kMins) out = _mm256_add_ps(out, _mm256_set1_ps(c.mins[unit]));
    _mm256_storeu_ps(yv, out);
  }
}

// Pass 2 of Q4_K in 256 bits: per 32 bytes of qs (pair p: sub-blocks 2p in the low nibbles, 2p + 1
// in the high ones), the 4-row steps of the group accumulate both sub-blocks' 32 columns.
template <typename Dp>
struct SumsQ4_K_256 {
  static void add(const uint8_t* const* rows, int steps, int64_t off, const KCoefs& c, float* y) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {
      __m256i lo[4], hi[4];
      for (int i = 0; i < 4; ++i) lo[i] = hi[i] = _mm256_setzero_si256();
      const int64_t at = off + static_cast<int64_t>(offsetof(BlockQ4_K, qs)) + 32 * p;
      for (int k = 0; k < steps; ++k) {
        const Quads256 q = load_quads256(rows + 4 * k, at);
        const __m256i tl = _mm256_set1_epi32(c.t4[k][2 * p]);
        const __m256i th = _mm256_set1_epi32(c.t4[k][2 * p + 1]);
        for (int i = 0; i < 4; ++i) {
          lo[i] = Dp::dot(lo[i], _mm256_and_si256(q.q[i], m4), tl);
          hi[i] = Dp::dot(hi[i], _mm256_and_si256(_mm256_srli_epi16(q.q[i], 4), m4), th);
        }
      }
      finish32<true>(lo, c, 2 * p, 2 * p, y + 64 * p);
      finish32<true>(hi, c, 2 * p + 1, 2 * p + 1, y + 64 * p + 32);
    }
  }
};

// Pass 2 of Q6_K in 256 bits. Per 128 columns (half h: ql[64h..], qh[32h..]) and per 32 bytes of
// ql (part 0: ql[l], part 1: ql[32 + l]), the low nibbles with 2 bits of qh are columns
// 32 part + l (units 8h + 2 part, + 1), the high nibbles columns 64 + 32 part + l (units
// 8h + 4 + 2 part, + 1), as dequantize_row reads them.
template <typename Dp>
struct SumsQ6_K_256 {
  static void add(const uint8_t* const* rows, int steps, int64_t off, const KCoefs& c, float* y) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      for (int part = 0; part < 2; ++part) {
        __m256i lo[4], hi[4];
        for (int i = 0; i < 4; ++i) lo[i] = hi[i] = _mm256_setzero_si256();
        const int64_t at_l = off + 64 * h + 32 * part;
        const int64_t at_h = off + static_cast<int64_t>(offsetof(BlockQ6_K, qh)) + 32 * h;
        const int u_lo = 8 * h + 2 * part, u_hi = u_lo + 4;
        for (int k = 0; k < steps; ++k) {
          const Quads256 ql = load_quads256(rows + 4 * k, at_l);
          const Quads256 qh = load_quads256(rows + 4 * k, at_h);
          const __m256i tl = two_units(c.t4[k] + u_lo), th = two_units(c.t4[k] + u_hi);
          for (int i = 0; i < 4; ++i) {
            // Bits 4-5 of a low-nibble code are bits 2 part.. of qh, of a high one bits 4 + 2 part.
            const __m256i top_lo =
                part ? _mm256_slli_epi16(qh.q[i], 2) : _mm256_slli_epi16(qh.q[i], 4);
            const __m256i top_hi = part ? _mm256_srli_epi16(qh.q[i], 2) : qh.q[i];
            const __m256i code_lo =
                _mm256_or_si256(_mm256_and_si256(ql.q[i], m4), _mm256_and_si256(top_lo, m30));
            const __m256i code_hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(ql.q[i], 4), m4), _mm256_and_si256(top_hi, m30));
            lo[i] = Dp::dot(lo[i], code_lo, tl);
            hi[i] = Dp::dot(hi[i], code_hi, th);
          }
        }
        float* yh = y + 128 * h + 32 * part;
        finish32<false>(lo, c, u_lo, u_lo + 1, yh);
        finish32<false>(hi, c, u_hi, u_hi + 1, yh + 64);
      }
    }
  }

 private:
  // t of units u (128-bit lane 0) and u + 1 (lane 1), each in all 4 of its lane's dwords.
  static __m256i two_units(const int32_t* t) {
    const __m128i pair = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t));
    return _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(pair),
                                       _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
