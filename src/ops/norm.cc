#include "ops/norm.h"

#include <cmath>

#include "ops/avx2/ops_avx2.h"

namespace hearth {
namespace {

// Below this many elements a row batch is normalised on the calling thread: waking the pool costs
// more than the work.
constexpr int64_t kMinParallelElems = 1 << 15;

double sum_squares(cpu::Isa isa, const float* x, int64_t n) {
  if (ops_avx2::enabled(isa)) return ops_avx2::sum_squares(x, n);
  double sum = 0.0;
  // The product is rounded to float before widening, as in ggml.
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

// y = (x · s) · w, or x · s without a weight.
void scale_mul(cpu::Isa isa, const float* x, float s, const float* w, int64_t n, float* y) {
  if (ops_avx2::enabled(isa)) return ops_avx2::scale_mul(x, s, w, n, y);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  }
}

template <typename RowFn>
void for_rows(cpu::CpuContext& ctx, int64_t n_rows, int64_t n, RowFn&& row_fn) {
  if (n_rows < 2 || n_rows * n < kMinParallelElems || ctx.n_threads() == 1) {
    for (int64_t r = 0; r < n_rows; ++r) row_fn(r);
    return;
  }
  ctx.pool().run([&](int ith, int nth) {
    const auto [begin, end] = cpu::split_range(n_rows, ith, nth);
    for (int64_t r = begin; r < end; ++r) row_fn(r);
  });
}

}  // namespace

void rms_norm(cpu::Isa isa, const float* x, const float* w, float eps, int64_t n, float* y) {
  const float mean = static_cast<float>(sum_squares(isa, x, n) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  scale_mul(isa, x, scale, w, n, y);
}

void rms_norm_rows(cpu::CpuContext& ctx, const float* x, const float* w, float eps, int64_t n_rows,
                   int64_t n, float* y) {
  const cpu::Isa isa = ctx.isa();
  for_rows(ctx, n_rows, n, [&](int64_t r) { rms_norm(isa, x + r * n, w, eps, n, y + r * n); });
}

void layer_norm(cpu::Isa isa, const float* x, const float* w, const float* b, float eps, int64_t n,
                float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mean;
  const float variance = static_cast<float>(sum_squares(isa, y, n) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  scale_mul(isa, y, scale, w, n, y);
  if (b) {
    for (int64_t i = 0; i < n; ++i) y[i] += b[i];
  }
}

void layer_norm_rows(cpu::CpuContext& ctx, const float* x, const float* w, const float* b,
                     float eps, int64_t n_rows, int64_t n, float* y) {
  const cpu::Isa isa = ctx.isa();
  for_rows(ctx, n_rows, n, [&](int64_t r) { layer_norm(isa, x + r * n, w, b, eps, n, y + r * n); });
}

}  // namespace hearth
