// Small helpers shared by the per-family forward passes (forward_*.cc). Internal to src/model/.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "model/weights.h"
#include "ops/matmul.h"
#include "ops/vec.h"

namespace hearth {

// y[n, m.rows] = x[n, m.cols] · m^T: matrix-vector for one token, matrix-matrix for a batch.
inline void linear(cpu::CpuContext& ctx, const Matrix& m, const float* x, int64_t n, float* y) {
  if (n == 1) {
    matvec(ctx, m.type, m.data, m.rows, m.cols, x, y);
  } else {
    matmul(ctx, m.type, m.data, m.rows, m.cols, x, n, y);
  }
}

// y[n, width] += bias[width] in every row.
inline void add_bias(cpu::Isa isa, float* y, const float* bias, int64_t n, int64_t width) {
  for (int64_t t = 0; t < n; ++t) vec_add(isa, y + t * width, bias, width);
}

// y[n, m.rows] = x[n, m.cols] · m^T + bias
inline void linear_bias(cpu::CpuContext& ctx, const Matrix& m, const float* bias, const float* x,
                        int64_t n, float* y) {
  linear(ctx, m, x, n, y);
  add_bias(ctx.isa(), y, bias, n, m.rows);
}

}  // namespace hearth
