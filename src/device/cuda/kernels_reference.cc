#include "device/cuda/kernels_reference.h"

#include <cmath>
#include <numeric>

#include "core/quantize.h"

namespace hearth::gpu::reference {
namespace {

std::vector<float> dequantized_row(DType t, const void* w, int64_t r, int64_t cols) {
  std::vector<float> row(static_cast<size_t>(cols));
  dequantize_row(t, static_cast<const uint8_t*>(w) + r * row_bytes(t, cols), row.data(), cols);
  return row;
}

}  // namespace

void matmul(DType t, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
            float* y_abs) {
  std::vector<int32_t> all(static_cast<size_t>(rows));
  std::iota(all.begin(), all.end(), 0);
  gather_matvec(t, w, rows, cols, all.data(), rows, nullptr, x, n, y, y_abs);
}

void gather_matvec(DType t, const void* w, int64_t rows, int64_t cols, const int32_t* idx,
                   int64_t k, const float* bias, const float* x, int64_t n, float* y,
                   float* y_abs) {
  for (int64_t j = 0; j < k; ++j) {
    const std::vector<float> row = dequantized_row(t, w, idx[j], cols);
    const double b = bias ? bias[idx[j]] : 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double sum = b, abs = std::fabs(b);
      for (int64_t c = 0; c < cols; ++c) {
        const double term = static_cast<double>(row[c]) * x[i * cols + c];
        sum += term;
        abs += std::fabs(term);
      }
      y[i * k + j] = static_cast<float>(sum);
      if (y_abs) y_abs[i * k + j] = static_cast<float>(abs);
    }
  }
}

void axpy(DType t, const void* w_t, int64_t rows, int64_t cols, const int32_t* idx, int64_t k,
          const float* a, int64_t n, const float* bias, float* y, float* y_abs) {
  std::vector<double> sum(static_cast<size_t>(n * cols), 0.0), abs(sum.size(), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    const std::vector<float> row = dequantized_row(t, w_t, idx[j], cols);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < cols; ++c) {
        const double term = static_cast<double>(a[i * k + j]) * row[c];
        sum[i * cols + c] += term;
        abs[i * cols + c] += std::fabs(term);
      }
    }
  }
  for (int64_t i = 0; i < n * cols; ++i) {
    const double b = bias ? bias[i % cols] : 0.0;
    y[i] = static_cast<float>(sum[i] + b);
    if (y_abs) y_abs[i] = static_cast<float>(abs[i] + std::fabs(b));
  }
}

Compacted compact_nonzero(const float* values, int64_t n, int64_t k) {
  Compacted out;
  for (int64_t j = 0; j < k; ++j) {
    uint64_t hits = 0;
    for (int64_t t = 0; t < n; ++t) hits += values[t * k + j] != 0.0f ? 1 : 0;
    if (hits) out.idx.push_back(static_cast<int32_t>(j));
    out.pairs += hits;
  }
  return out;
}

}  // namespace hearth::gpu::reference
