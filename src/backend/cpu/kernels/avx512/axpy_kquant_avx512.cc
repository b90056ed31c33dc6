// The one-token K-quant axpy of the AVX-512 table.
// - Q4_K and Q6_K sum in 8-bit integers (avx2/axpy_kquant_int.h) with their pass 2 in 512 bits
//   (below): per 4-row step, 64 bytes of each row are transposed into 4 quads and met by
//   vpdpbusd, twice the columns of the 256-bit pass and no maddubs/madd pair. The integer sums
//   and the float steps are those of the AVX2 kernel, so the outputs are the same bits.
// - Q5_K takes the AVX2 kernel's float passes (the same rows per pass from avx2/axpy_window.h,
//   the same per-super-block factors, the same per-element FMAs in ascending row order and the
//   same per-pass min terms) with 16 columns per vector, so a sub-block of 32 codes is two
//   widenings, two conversions and two FMAs instead of four of each: the AVX2 kernel's bits.
// Other token counts stay AVX2.
#include <array>
#include <cstddef>

#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/avx512/avx512_kernels.h"

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/axpy_kquant_decode.h"
#include "backend/cpu/kernels/avx2/axpy_kquant_int.h"
#include "backend/cpu/kernels/avx2/axpy_window.h"
#include "backend/cpu/kernels/avx512/avx512_util.h"

namespace hearth::cpu::avx512 {
namespace {

// acc[0] += s * (codes 0-15), acc[1] += s * (codes 16-31): the AVX2 kernel's four 8-column
// vectors, two at a time.
void add_codes(__m256i q, __m512 s_lo, __m512 s_hi, __m512* acc) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const auto widen = [](__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)); };
  acc[0] = _mm512_fmadd_ps(s_lo, widen(lo), acc[0]);
  acc[1] = _mm512_fmadd_ps(s_hi, widen(hi), acc[1]);
}

// Q5_K: one scale per 32 codes, and a min term per pass (returned).
template <typename Block, typename Codes>
struct WideK4 {
  using Decode = avx2::DecodeK4<Block, Codes>;
  static float add(const uint8_t* row, int64_t c, const float* f, __m512* acc) {
    int sub;
    const Block& b = avx2::k_block<Block>(row, c, sub);
    const __m512 s = _mm512_set1_ps(f[sub]);
    add_codes(Codes::get(b, sub), s, s, acc);
    return f[8 + sub];
  }
};

// One pass of R rows (coefficients a[j[r]]) over y[n]; `next` as in the AVX2 pass.
template <typename W, int R>
void pass(int64_t n, const uint8_t* const* w, const uint8_t* const* next, const int64_t* j,
          const float* a, float* y) {
  using D = typename W::Decode;
  constexpr int64_t kCols = 32;
  // Prefetch once per cache line of weights: every kLineChunks chunks of 32 columns.
  constexpr int64_t kLineChunks = D::kChunkBytes >= 64 ? 1 : 64 / D::kChunkBytes;
  alignas(64) float factors[R][16];
  for (int64_t c = 0; c + kCols <= n; c += kCols) {
    if ((c / kCols) % kLineChunks == 0) {
      const int64_t offset = c / kCols * D::kChunkBytes;
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(next[r] + offset), _MM_HINT_T0);
      }
    }
    if (c % kQK_K == 0) {
      for (int r = 0; r < R; ++r) D::set_factors(w[r], c, a[j[r]], factors[r]);
    }
    __m512 acc[2] = {_mm512_loadu_ps(y + c), _mm512_loadu_ps(y + c + 16)};
    float mins = 0.0f;
    for (int r = 0; r < R; ++r) mins += W::add(w[r], c, factors[r], acc);
    const __m512 m = _mm512_set1_ps(mins);
    _mm512_storeu_ps(y + c, _mm512_sub_ps(acc[0], m));
    _mm512_storeu_ps(y + c + 16, _mm512_sub_ps(acc[1], m));
  }
}

template <typename W, auto kOtherCounts>
void axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr, const float* a,
          size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt != 1) return kOtherCounts(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  avx2::for_each_axpy_pass(static_cast<const uint8_t*>(w), ldw, idx, nr, a, lda, nt,
                           [&]<int R>(const uint8_t* const* rows, const uint8_t* const* next,
                                      const int64_t* js) { pass<W, R>(n, rows, next, js, a, y); });
}

// 4 rows' 64 bytes transposed: q[i] holds, in 32-bit lane 4L + k, byte 16L + 4i + k of the 4
// rows (row r in byte r), for 128-bit lanes L = 0..3.
struct Quads512 {
  __m512i q[4];
};
Quads512 load_quads512(const uint8_t* const* rows, int64_t at, bool broadcast32) {
  const auto load = [at, broadcast32](const uint8_t* row) {
    // 32 bytes in both halves (Q6_K's qh, shared by both halves of ql) or 64 bytes.
    return broadcast32 ? _mm512_broadcast_i64x4(
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + at)))
                       : _mm512_loadu_si512(row + at);
  };
  const __m512i r0 = load(rows[0]), r1 = load(rows[1]), r2 = load(rows[2]), r3 = load(rows[3]);
  const __m512i lo01 = _mm512_unpacklo_epi8(r0, r1), hi01 = _mm512_unpackhi_epi8(r0, r1);
  const __m512i lo23 = _mm512_unpacklo_epi8(r2, r3), hi23 = _mm512_unpackhi_epi8(r2, r3);
  return {{_mm512_unpacklo_epi16(lo01, lo23), _mm512_unpackhi_epi16(lo01, lo23),
           _mm512_unpacklo_epi16(hi01, hi23), _mm512_unpackhi_epi16(hi01, hi23)}};
}

// t of the units in u (one per 128-bit lane), each in all 4 dwords of its lane.
__m512i lane_units(const int32_t* t4, std::array<int, 4> u) {
  const __m512i idx = _mm512_setr_epi32(u[0], u[0], u[0], u[0], u[1], u[1], u[1], u[1], u[2], u[2],
                                        u[2], u[2], u[3], u[3], u[3], u[3]);
  return _mm512_permutexvar_epi32(idx, _mm512_load_si512(t4));
}

// Adds 4 x 16 columns of integer sums into y: acc[i] as load_quads512 leaves them (lane L holds
// columns 4i .. 4i + 3 of 16-column block L), block L going to dst[L] in unit u[L]:
// y += S * float(sum + base), then the min term where the type has one. The same steps as
// avx2::finish32.
template <bool kMins>
void finish64(const __m512i (&acc)[4], const avx2::KCoefs& c, std::array<int, 4> u,
              std::array<float*, 4> dst) {
  // A 4 x 4 transpose of 128-bit blocks: output L = block L of acc[0], ..., acc[3].
  // (The masked shuffles: GCC 12's unmasked ones trip -Wuninitialized.)
  const __m512i a01 = _mm512_maskz_shuffle_i32x4(0xffff, acc[0], acc[1], 0x44);
  const __m512i a23 = _mm512_maskz_shuffle_i32x4(0xffff, acc[2], acc[3], 0x44);
  const __m512i b01 = _mm512_maskz_shuffle_i32x4(0xffff, acc[0], acc[1], 0xee);
  const __m512i b23 = _mm512_maskz_shuffle_i32x4(0xffff, acc[2], acc[3], 0xee);
  const __m512i cols[4] = {_mm512_maskz_shuffle_i32x4(0xffff, a01, a23, 0x88),
                           _mm512_maskz_shuffle_i32x4(0xffff, a01, a23, 0xdd),
                           _mm512_maskz_shuffle_i32x4(0xffff, b01, b23, 0x88),
                           _mm512_maskz_shuffle_i32x4(0xffff, b01, b23, 0xdd)};
  for (size_t v = 0; v < 4; ++v) {
    const int unit = u[v];
    __m512 out = _mm512_loadu_ps(dst[v]);
    if (c.mvals[unit] >= generic::kAxpyMinScale) {
      const __m512i sum = _mm512_add_epi32(cols[v], _mm512_set1_epi32(c.base[unit]));
      out = _mm512_fmadd_ps(_mm512_set1_ps(c.scale[unit]), _mm512_cvtepi32_ps(sum), out);
    }
    if (kMins) out = _mm512_add_ps(out, _mm512_set1_ps(c.mins[unit]));
    _mm512_storeu_ps(dst[v], out);
  }
}

// Pass 2 of Q4_K: per half of qs (64 bytes: pairs 2h and 2h + 1), the low nibbles are
// sub-blocks s = 4h (lanes 0, 1) and s + 2 (lanes 2, 3), the high ones s + 1 and s + 3.
struct SumsQ4_K_512 {
  static void add(const uint8_t* const* rows, int steps, int64_t off, const avx2::KCoefs& c,
                  float* y) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < 2; ++h) {
      __m512i lo[4], hi[4];
      for (int i = 0; i < 4; ++i) lo[i] = hi[i] = _mm512_setzero_si512();
      const int64_t at = off + static_cast<int64_t>(offsetof(BlockQ4_K, qs)) + 64 * h;
      const int s = 4 * h;
      for (int k = 0; k < steps; ++k) {
        const Quads512 q = load_quads512(rows + 4 * k, at, false);
        const __m512i tl = lane_units(c.t4[k], {s, s, s + 2, s + 2});
        const __m512i th = lane_units(c.t4[k], {s + 1, s + 1, s + 3, s + 3});
        for (int i = 0; i < 4; ++i) {
          lo[i] = _mm512_dpbusd_epi32(lo[i], _mm512_and_si512(q.q[i], m4), tl);
          hi[i] =
              _mm512_dpbusd_epi32(hi[i], _mm512_and_si512(_mm512_srli_epi16(q.q[i], 4), m4), th);
        }
      }
      float* ys = y + 32 * s;
      finish64<true>(lo, c, {s, s, s + 2, s + 2}, {ys, ys + 16, ys + 64, ys + 80});
      finish64<true>(hi, c, {s + 1, s + 1, s + 3, s + 3}, {ys + 32, ys + 48, ys + 96, ys + 112});
    }
  }
};

// Pass 2 of Q6_K: per half h (128 columns: ql[64h..], qh[32h..]), ql's 64 bytes are parts 0
// (lanes 0, 1) and 1 (lanes 2, 3) of avx2::SumsQ6_K_256, and qh's 32 bytes, loaded into both
// halves, line up with both. Low nibbles are columns 0-63 (units 8h..8h + 3), high ones 64-127
// (units 8h + 4..8h + 7).
struct SumsQ6_K_512 {
  static void add(const uint8_t* const* rows, int steps, int64_t off, const avx2::KCoefs& c,
                  float* y) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    // Bits 4-5 of a code: qh shifted left by 4 (part 0) or 2 (part 1) for low nibbles, right by
    // 0 or 2 for high ones (per 16-bit lane: lanes 0-15 are part 0, 16-31 part 1).
    const __m512i up =
        _mm512_mask_blend_epi16(0xffff0000, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
    const __m512i down =
        _mm512_mask_blend_epi16(0xffff0000, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    for (int h = 0; h < 2; ++h) {
      __m512i lo[4], hi[4];
      for (int i = 0; i < 4; ++i) lo[i] = hi[i] = _mm512_setzero_si512();
      const int64_t at_l = off + 64 * h;
      const int64_t at_h = off + static_cast<int64_t>(offsetof(BlockQ6_K, qh)) + 32 * h;
      const int u = 8 * h;
      for (int k = 0; k < steps; ++k) {
        const Quads512 ql = load_quads512(rows + 4 * k, at_l, false);
        const Quads512 qh = load_quads512(rows + 4 * k, at_h, true);
        const __m512i tl = lane_units(c.t4[k], {u, u + 1, u + 2, u + 3});
        const __m512i th = lane_units(c.t4[k], {u + 4, u + 5, u + 6, u + 7});
        for (int i = 0; i < 4; ++i) {
          const __m512i code_lo = _mm512_or_si512(
              _mm512_and_si512(ql.q[i], m4), _mm512_and_si512(_mm512_sllv_epi16(qh.q[i], up), m30));
          const __m512i code_hi =
              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql.q[i], 4), m4),
                              _mm512_and_si512(_mm512_srlv_epi16(qh.q[i], down), m30));
          lo[i] = _mm512_dpbusd_epi32(lo[i], code_lo, tl);
          hi[i] = _mm512_dpbusd_epi32(hi[i], code_hi, th);
        }
      }
      float* yh = y + 128 * h;
      finish64<false>(lo, c, {u, u + 1, u + 2, u + 3}, {yh, yh + 16, yh + 32, yh + 48});
      finish64<false>(hi, c, {u + 4, u + 5, u + 6, u + 7}, {yh + 64, yh + 80, yh + 96, yh + 112});
    }
  }
};

// One token of Q4_K and Q6_K in integers, other token counts as AVX2.
template <DType T, typename Block, typename Coefs, typename Sums>
void kquant_int_axpy(int64_t n, const void* w, size_t ldw, const int32_t* idx, int64_t nr,
                     const float* a, size_t lda, int64_t nt, float* y, size_t ldy) {
  if (nt != 1) return avx2::axpy_kquant<T>(n, w, ldw, idx, nr, a, lda, nt, y, ldy);
  avx2::axpy_kquant_int_parts<Block, Coefs, Sums>(n, static_cast<const uint8_t*>(w), ldw, idx, a,
                                                  &nr, 1, y, 0);
}
template <typename Block, typename Coefs, typename Sums>
void kquant_int_axpy_parts(int64_t n, const void* w, size_t ldw, const int32_t* idx, const float* a,
                           const int64_t* ends, int64_t n_parts, float* y, size_t ldy) {
  avx2::axpy_kquant_int_parts<Block, Coefs, Sums>(n, static_cast<const uint8_t*>(w), ldw, idx, a,
                                                  ends, n_parts, y, ldy);
}

}  // namespace

void set_kquant_axpy_kernels(Kernels& k) {
  using avx2::CoefsQ4_K;
  using avx2::CoefsQ6_K;
  k.q4_k.axpy = kquant_int_axpy<DType::Q4_K, BlockQ4_K, CoefsQ4_K, SumsQ4_K_512>;
  k.q4_k.axpy_parts = kquant_int_axpy_parts<BlockQ4_K, CoefsQ4_K, SumsQ4_K_512>;
  k.q6_k.axpy = kquant_int_axpy<DType::Q6_K, BlockQ6_K, CoefsQ6_K, SumsQ6_K_512>;
  k.q6_k.axpy_parts = kquant_int_axpy_parts<BlockQ6_K, CoefsQ6_K, SumsQ6_K_512>;
  k.q5_k.axpy = axpy<WideK4<BlockQ5_K, avx2::CodesQ5_K>, avx2::axpy_kquant<DType::Q5_K>>;
}

}  // namespace hearth::cpu::avx512
