// AVX2 variants of ops/vec.h. Element-wise ops round exactly like the scalar loops (one mul or
// add per element; axpy uses FMA on both sides), so the two give the same bits.
#include <array>

#include "ops/avx2/ops_avx2.h"
#include "ops/avx2/simd.h"

namespace hearth::ops_avx2 {

void vec_add(float* y, const float* x, int64_t n) { vec_add_to(y, y, x, n); }

void vec_add_to(float* out, const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

void vec_mul(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] *= x[i];
}

void vec_scale(float* y, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs));
  for (; i < n; ++i) y[i] *= s;
}

void vec_axpy(float* y, float a, const float* x, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = __builtin_fmaf(a, x[i], y[i]);
}

float vec_dot_f32(const float* a, const float* b, int64_t n) {
  // Four accumulators hide the FMA latency.
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] =
          _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  }
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float vec_max(const float* x, int64_t n) {
  if (n < 8) {
    float m = x[0];
    for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
  }
  __m256 m = _mm256_loadu_ps(x);
  int64_t i = 8;
  // max(new, m) keeps m where the new lane is NaN, like the scalar loop.
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
  float r = hmax(m);
  for (; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

namespace {

// For each 8-bit mask of passing lanes, the passing lane numbers packed to the front, a byte
// each: the permutation that left-packs a vector of 8 indices.
constexpr std::array<uint64_t, 256> make_pack_table() {
  std::array<uint64_t, 256> t{};
  for (int m = 0; m < 256; ++m) {
    int k = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if (m & (1 << lane)) t[m] |= static_cast<uint64_t>(lane) << (8 * k++);
    }
  }
  return t;
}
constexpr std::array<uint64_t, 256> kPackTable = make_pack_table();

}  // namespace

// Branch-free: the passing lanes' indices, packed by a table lookup, are stored as a whole
// vector at slot k, and k moves by their count, so eight scores cost a few instructions and no
// mispredicted branch, where the scalar loop pays one per score.
int64_t select_at_least(const float* x, int64_t n, float threshold, int32_t* idx) {
  const __m256 thr = _mm256_set1_ps(threshold);
  int64_t k = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), thr, _CMP_GE_OQ));
    const __m256i lanes = _mm256_cvtepu8_epi32(
        _mm_cvtsi64_si128(static_cast<long long>(kPackTable[static_cast<size_t>(m)])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + k),
                        _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int32_t>(i))));
    k += __builtin_popcount(static_cast<unsigned>(m));
  }
  for (; i < n; ++i) {
    if (x[i] >= threshold) idx[k++] = static_cast<int32_t>(i);
  }
  return k;
}

double exp_sum_store(const float* x, float max, float* y, int64_t n) {
  const __m256 vmax = _mm256_set1_ps(max);
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  if (i < n) {
    const __m256i mask = tail_mask(static_cast<int>(n - i));
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vmax)),
                                   _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(y + i, mask, e);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_f16x8(y + i, _mm256_loadu_ps(x + i));
  if (i < n) {
    alignas(32) float in[8] = {};
    alignas(16) uint16_t out[8];
    for (int64_t k = i; k < n; ++k) in[k - i] = x[k];
    store_f16x8(out, _mm256_load_ps(in));
    for (int64_t k = i; k < n; ++k) y[k] = out[k - i];
  }
}

}  // namespace hearth::ops_avx2
