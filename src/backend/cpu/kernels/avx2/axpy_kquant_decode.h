// The axpy decoders of the K-quants (Q4_K, Q5_K, Q6_K rows: a neuron-major down a K-quant file
// carries). They plug into axpy_avx2.cc's axpy template (run() for several tokens, set_factors()
// / add_factored() for one); the AVX-512 one-token kernels (avx512/axpy_kquant_avx512.cc) take
// their codes and factors. Include only from files compiled with AVX2 or more.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/quant_blocks.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
inline namespace HEARTH_AVX2_ABI {

// K-quant rows 32 columns (one sub-block) at a time, from the sub-block's scale (and min) in the
// super-block header: d * sc and dmin * m are formed as dequantize_row forms them, then each
// weight is one FMA (q * d1 - m1, a single rounding where the reference has two) or, for Q6_K,
// (d * sc) * (q - 32), the reference's own two products.
template <typename Block>
const Block& k_block(const uint8_t* row, int64_t c) {
  return reinterpret_cast<const Block*>(row)[c / kQK_K];
}
template <typename Block>
const Block& k_block(const uint8_t* row, int64_t c, int& sub) {
  sub = static_cast<int>(c % kQK_K) / kQK;
  return k_block<Block>(row, c);
}

// The 4 float vectors of 32 codes (unsigned or signed bytes), each passed to op(v, vector).
template <bool kSigned, typename Op>
inline void code_vectors(__m256i q, Op op) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int v = 0; v < 4; ++v) {
    const __m256i i32 = kSigned ? _mm256_cvtepi8_epi32(parts[v]) : _mm256_cvtepu8_epi32(parts[v]);
    op(v, _mm256_cvtepi32_ps(i32));
  }
}

// 32 unsigned codes -> 4 vectors of 8 floats, each q * d1 - m1.
inline void bytes_to_floats(__m256i q, __m256 d1, __m256 m1, __m256* out) {
  code_vectors<false>(q, [&](int v, __m256 f) { out[v] = _mm256_fmsub_ps(f, d1, m1); });
}

// The 4-bit codes of sub-block `sub` of a Q4_K / Q5_K super-block: 32 bytes of qs, low or high
// nibbles.
inline __m256i k4_nibbles(const uint8_t* qs, int sub) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (sub / 2)));
  const __m256i shifted = (sub & 1) ? _mm256_srli_epi16(bytes, 4) : bytes;
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

template <typename Block>
void k4_factors(const Block& b, int sub, __m256& d1, __m256& m1) {
  const ScaleMin sm = k4_scale_min(b.scales, sub);
  d1 = _mm256_set1_ps(half_to_float(b.d) * static_cast<float>(sm.scale));
  m1 = _mm256_set1_ps(half_to_float(b.dmin) * static_cast<float>(sm.min));
}

// One token of a K-quant row, a super-block at a time: set_factors(row, c, a, f) puts the 16
// factors of the super-block at column c, coefficient a included, in f (8 scale factors
// a * d1, then 8 min terms a * m1; for Q6_K the 16 per-16 factors a * d * sc), and
// add_factored(row, c, f, acc) adds the 32 columns at c and returns their min term. Each weight
// vector then costs one conversion and one FMA with a broadcast from memory, and the header is
// decoded once per 256 columns instead of once per 32. Products round in other places
// than the reference's y += a * (d1 * q - m1), and a pass adds its rows' min terms together.
template <typename Block>
void k4_factors_scaled(const uint8_t* row, int64_t c, float a, float* f) {
  const Block& b = k_block<Block>(row, c);
  const float d = a * half_to_float(b.d), dmin = a * half_to_float(b.dmin);
  for (int k = 0; k < 8; ++k) {
    const ScaleMin sm = k4_scale_min(b.scales, k);
    f[k] = d * static_cast<float>(sm.scale);
    f[8 + k] = dmin * static_cast<float>(sm.min);
  }
}

// acc += f[sub] * codes (32 unsigned bytes), returns the min term f[8 + sub].
inline float add_factored_u8(__m256i q, const float* f, int sub, __m256* acc) {
  const __m256 s = _mm256_broadcast_ss(f + sub);
  code_vectors<false>(q, [&](int v, __m256 x) { acc[v] = _mm256_fmadd_ps(s, x, acc[v]); });
  return f[8 + sub];
}

// Q5_K's 5-bit codes of sub-block `sub`: the nibbles plus bit `sub` of each qh byte as 16.
inline __m256i k5_codes(const BlockQ5_K& b, int sub) {
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
  const __m256i bit = _mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(1 << sub)));
  const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(bit, _mm256_setzero_si256()),
                                        _mm256_set1_epi8(16));
  const __m256i codes = _mm256_xor_si256(k4_nibbles(b.qs, sub), _mm256_set1_epi8(16));
  return _mm256_xor_si256(codes, high);
}

struct CodesQ4_K {
  static __m256i get(const BlockQ4_K& b, int sub) { return k4_nibbles(b.qs, sub); }
};
struct CodesQ5_K {
  static __m256i get(const BlockQ5_K& b, int sub) { return k5_codes(b, sub); }
};

// Q4_K and Q5_K: unsigned codes (Codes::get(block, sub)) with per-32 scales and mins.
template <typename Block, typename Codes>
struct DecodeK4 {
  static constexpr int kVecs = 4;
  static constexpr int64_t kChunkBytes = sizeof(Block) / 8;
  static void run(const uint8_t* row, int64_t c, __m256* out) {
    int sub;
    const Block& b = k_block<Block>(row, c, sub);
    __m256 d1, m1;
    k4_factors(b, sub, d1, m1);
    bytes_to_floats(Codes::get(b, sub), d1, m1, out);
  }
  static void set_factors(const uint8_t* row, int64_t c, float a, float* f) {
    k4_factors_scaled<Block>(row, c, a, f);
  }
  static float add_factored(const uint8_t* row, int64_t c, const float* f, __m256* acc) {
    int sub;
    const Block& b = k_block<Block>(row, c, sub);
    return add_factored_u8(Codes::get(b, sub), f, sub, acc);
  }
};

using DecodeQ4_K = DecodeK4<BlockQ4_K, CodesQ4_K>;
using DecodeQ5_K = DecodeK4<BlockQ5_K, CodesQ5_K>;

// Q6_K's codes minus 32 of sub-block `sub` (32 signed bytes).
inline __m256i k6_codes(const BlockQ6_K& b, int sub) {
  const int h = sub / 4, k = sub % 4;
  const __m256i ql =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (k & 1)));
  const __m256i low =
      _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0f));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  const __m256i top = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
  return _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(top, 4)), _mm256_set1_epi8(32));
}

struct DecodeQ6_K {
  static constexpr int kVecs = 4;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ6_K) / 8;
  static void run(const uint8_t* row, int64_t c, __m256* out) {
    int sub;
    const BlockQ6_K& b = k_block<BlockQ6_K>(row, c, sub);
    const float d = half_to_float(b.d);
    // Sub-blocks of 16: the first two vectors take one scale, the last two the next.
    const __m256 d_lo = _mm256_set1_ps(d * static_cast<float>(b.scales[2 * sub]));
    const __m256 d_hi = _mm256_set1_ps(d * static_cast<float>(b.scales[2 * sub + 1]));
    code_vectors<true>(k6_codes(b, sub),
                       [&](int v, __m256 f) { out[v] = _mm256_mul_ps(v < 2 ? d_lo : d_hi, f); });
  }
  static void set_factors(const uint8_t* row, int64_t c, float a, float* f) {
    const BlockQ6_K& b = k_block<BlockQ6_K>(row, c);
    const float d = half_to_float(b.d);
    for (int k = 0; k < 16; ++k) f[k] = a * (d * static_cast<float>(b.scales[k]));
  }
  static float add_factored(const uint8_t* row, int64_t c, const float* f, __m256* acc) {
    int sub;
    const BlockQ6_K& b = k_block<BlockQ6_K>(row, c, sub);
    const __m256 s_lo = _mm256_broadcast_ss(f + 2 * sub);
    const __m256 s_hi = _mm256_broadcast_ss(f + 2 * sub + 1);
    code_vectors<true>(k6_codes(b, sub), [&](int v, __m256 q) {
      acc[v] = _mm256_fmadd_ps(v < 2 ? s_lo : s_hi, q, acc[v]);
    });
    return 0.0f;
  }
};

}  // namespace HEARTH_AVX2_ABI
}  // namespace hearth::cpu::avx2
