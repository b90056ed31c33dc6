// Products of a weight Matrix with a batch of activation rows, and bias rows: the two steps every
// forward pass and the FFN executor take. Internal to src/model and src/sparse.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "model/weights.h"
#include "ops/matmul.h"
#include "ops/vec.h"

namespace hearth {

// y[n, m.rows] = x[n, m.cols] · m^T: matrix-vector for one token, matrix-matrix for a batch.
inline void linear(cpu::CpuContext& ctx, const Matrix& m, const float* x, int64_t n, float* y) {
  if (cpu::MatmulHook* hook = ctx.matmul_hook()) hook->on_matmul(m.data, x, n, m.cols);
  matmul(ctx, m.type, m.data, m.rows, m.cols, x, n, y);
}

// y[n, width] += bias[width] in every row; nothing when there is no bias.
inline void add_bias(cpu::Isa isa, float* y, const float* bias, int64_t n, int64_t width) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) vec_add(isa, y + t * width, bias, width);
}

}  // namespace hearth
