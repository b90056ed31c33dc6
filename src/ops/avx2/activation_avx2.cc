// AVX2 activations. Tails go through the same vector code (masked loads and stores), so that an
// element's result does not depend on where it sits in the array.
#include "ops/avx2/ops_avx2.h"
#include "ops/avx2/simd.h"

namespace hearth::ops_avx2 {
namespace {

// GELU, tanh form, rewritten as x · sigmoid(2u) since 0.5 (1 + tanh u) = 1 / (1 + e^-2u): one
// exponential, and no cancellation in 1 + tanh u for large negative x.
inline __m256 gelu_ps(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x2, _mm256_set1_ps(1.0f));
  const __m256 u =
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.79788456080286535587989211986876f), x), inner);
  const __m256 e = exp_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

template <typename F>
void map(const float* x, int64_t n, float* y, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i mask = tail_mask(static_cast<int>(n - i));
    _mm256_maskstore_ps(y + i, mask, f(_mm256_maskload_ps(x + i, mask)));
  }
}

template <typename F>
void map_glu(const float* gate, const float* up, int64_t n, float* out, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(f(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    const __m256i mask = tail_mask(static_cast<int>(n - i));
    const __m256 g = f(_mm256_maskload_ps(gate + i, mask));
    _mm256_maskstore_ps(out + i, mask, _mm256_mul_ps(g, _mm256_maskload_ps(up + i, mask)));
  }
}

}  // namespace

void silu(const float* x, int64_t n, float* y) { map(x, n, y, silu_ps); }
void gelu(const float* x, int64_t n, float* y) { map(x, n, y, gelu_ps); }
void vec_exp(const float* x, int64_t n, float* y) { map(x, n, y, exp_ps); }

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  map_glu(gate, up, n, out, silu_ps);
}
void geglu(const float* gate, const float* up, int64_t n, float* out) {
  map_glu(gate, up, n, out, gelu_ps);
}

}  // namespace hearth::ops_avx2
