// Row conversions and the activation quantizers. The quantizers are bit-identical to the scalar
// references (same scale arithmetic, same rounding), so switching ISA never changes which
// integers the dot products see.
#include <cstring>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "core/dtype.h"
#include "core/quant_blocks.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/avx2_util.h"

namespace hearth::cpu::avx2 {
namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf semantics: truncate, then step away from zero when the dropped fraction is >= 1/2.
// (Adding 0.5 before truncating would misround 0.49999997f.) v - trunc(v) is exact.
inline __m256i round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_sub_ps(v, t);
  const __m256 away = _mm256_cmp_ps(abs_ps(frac), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one_signed =
      _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_cvtps_epi32(_mm256_add_ps(t, _mm256_and_ps(away, one_signed)));
}

// Four vectors of 8 int32 (each in [-127, 127]) -> 32 int8 in order.
inline __m256i pack_i32x32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  // packs works within 128-bit halves, leaving the 4-element groups interleaved; one
  // cross-lane permute restores element order.
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The largest of 8 floats.
inline float hmax(__m256 m) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// Block b of an activation row: its 32 quants (q[4], each in [-127, 127]), scale d and sums: the
// sum of all 32, or in a Q8K row (q8k) the sums of the first and the last 16 (act_layout.h).
void store_block(const __m256i (&q)[4], float d, bool q8k, uint8_t* row, int64_t b) {
  const __m256i packed = pack_i32x32_to_i8(q[0], q[1], q[2], q[3]);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(row + act_quant_offset(b, 0)),
                   _mm256_castsi256_si128(packed));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(row + act_quant_offset(b, 16)),
                   _mm256_extracti128_si256(packed, 1));
  // The sums of the first 16 quants (F) and of the last 16 (L): per 128-bit half, [F, L, F, L]
  // after two horizontal adds, then the halves added.
  const __m256i first8 = _mm256_add_epi32(q[0], q[1]), last8 = _mm256_add_epi32(q[2], q[3]);
  __m256i fl = _mm256_hadd_epi32(first8, last8);
  fl = _mm256_hadd_epi32(fl, fl);
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(fl), _mm256_extracti128_si256(fl, 1));
  const int16_t half[2] = {static_cast<int16_t>(_mm_cvtsi128_si32(s4)),
                           static_cast<int16_t>(_mm_extract_epi32(s4, 1))};
  store_act_sums(row, b, d, half, q8k);
}

}  // namespace

void quantize_act_q8(const float* x, void* y, int64_t n) {
  auto* row = static_cast<uint8_t*>(y);
  const int64_t nb = n / kQK;
  // Padding blocks of the last group must read as zero quants with zero scale.
  const int64_t tail_begin = nb / kActGroupBlocks * kActGroupBytes;
  std::memset(row + tail_begin, 0, static_cast<size_t>(act_q8_row_bytes(n) - tail_begin));
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK;
    __m256 v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(xb + 8 * j);
    const float amax = hmax(_mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
                                          _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3]))));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    const float d = half_to_float(float_to_half(scale));
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = round_half_away(_mm256_mul_ps(v[j], vinv));
    store_block(q, d, false, row, b);
  }
}

void quantize_act_q8k(const float* x, void* y, int64_t n) {
  auto* row = static_cast<uint8_t*>(y);
  for (int64_t g = 0; g < n / kQK_K; ++g) {
    const float* xg = x + g * kQK_K;
    // The signed value of largest magnitude, the first one on ties, as the reference finds it:
    // the magnitude in vectors (a NaN, the first operand, never replaces the running maximum,
    // as the reference's comparison skips it), then the first value that has it.
    __m256 m = _mm256_setzero_ps();
    for (int64_t j = 0; j < kQK_K; j += 8) m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(xg + j)), m);
    const float amax = hmax(m);
    float max = 0.0f;
    for (int64_t j = 0; amax != 0.0f && j < kQK_K; ++j) {
      if ((xg[j] < 0.0f ? -xg[j] : xg[j]) == amax) {
        max = xg[j];
        break;
      }
    }
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    const __m256 vis = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int64_t k = 0; k < kActGroupBlocks; ++k) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xg + k * kQK + 8 * j), vis);
        q[j] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
            top);
      }
      store_block(q, d, true, row, g * kActGroupBlocks + k);
    }
  }
}

void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_f16x8(x + i));
  for (; i < n; ++i) y[i] = half_to_float(x[i]);
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = float_to_half(x[i]);
}

void f16_to_float(const void* x, float* y, int64_t n) {
  fp16_to_fp32_row(static_cast<const uint16_t*>(x), y, n);
}

void bf16_to_float(const void* x, float* y, int64_t n) {
  const auto* in = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_bf16x8(in + i));
  for (; i < n; ++i) y[i] = bf16_to_f32(in[i]);
}

void q8_0_to_float(const void* x, float* y, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(x);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const __m256 d = _mm256_set1_ps(half_to_float(blocks[b].d));
    for (int j = 0; j < 4; ++j) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blocks[b].qs + 8 * j));
      const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
      _mm256_storeu_ps(y + b * kQK + 8 * j, _mm256_mul_ps(q, d));
    }
  }
}

void q4_0_to_float(const void* x, float* y, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(x);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const __m256 d = _mm256_set1_ps(half_to_float(blocks[b].d));
    alignas(32) int8_t q[kQK];
    _mm256_store_si256(reinterpret_cast<__m256i*>(q),
                       _mm256_sub_epi8(unpack_nibbles(blocks[b].qs), _mm256_set1_epi8(8)));
    for (int j = 0; j < 4; ++j) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * j));
      const __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
      _mm256_storeu_ps(y + b * kQK + 8 * j, _mm256_mul_ps(qf, d));
    }
  }
}

}  // namespace hearth::cpu::avx2
