#include "ops/vec.h"

#include <cmath>

#include "ops/avx2/ops_avx2.h"

namespace hearth {

void vec_add(cpu::Isa isa, float* y, const float* x, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_add(y, x, n);
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void vec_add_to(cpu::Isa isa, float* out, const float* a, const float* b, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_add_to(out, a, b, n);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void vec_mul(cpu::Isa isa, float* y, const float* x, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_mul(y, x, n);
  for (int64_t i = 0; i < n; ++i) y[i] *= x[i];
}

void vec_scale(cpu::Isa isa, float* y, float s, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_scale(y, s, n);
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

void vec_soft_cap(float* y, float cap, int64_t n) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(y[i] * inv);
}

void vec_axpy(cpu::Isa isa, float* y, float a, const float* x, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_axpy(y, a, x, n);
  // std::fma so that the scalar reference rounds once per element, like the FMA variant.
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

float vec_dot_f32(cpu::Isa isa, const float* a, const float* b, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_dot_f32(a, b, n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float vec_max(cpu::Isa isa, const float* x, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::vec_max(x, n);
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

void softmax(cpu::Isa isa, float* x, int64_t n) {
  const float max = vec_max(isa, x, n);
  double sum = 0.0;
  if (ops_avx2::enabled(isa)) {
    sum = ops_avx2::exp_sum_store(x, max, x, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      x[i] = std::exp(x[i] - max);
      sum += x[i];
    }
  }
  vec_scale(isa, x, static_cast<float>(1.0 / sum), n);
}

int64_t select_at_least(cpu::Isa isa, const float* x, int64_t n, float threshold, int32_t* idx) {
  if (ops_avx2::enabled(isa)) return ops_avx2::select_at_least(x, n, threshold, idx);
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] >= threshold) idx[k++] = static_cast<int32_t>(i);
  }
  return k;
}

int64_t mask_below(float* v, int64_t n, float threshold) {
  // Branch-free, so that the compiler vectorizes it.
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = std::fabs(v[i]) > threshold;
    kept += keep ? 1 : 0;
    v[i] = keep ? v[i] : 0.0f;
  }
  return kept;
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    // `!(x[best] >= x[i])` would pick NaNs; this comparison lets a NaN at 0 be replaced.
    if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = i;
  }
  return best;
}

}  // namespace hearth
