// Small helpers shared by the per-family forward passes (forward_*.cc). Internal to src/model/.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "model/linear.h"

namespace hearth {

// y[n, m.rows] = x[n, m.cols] · m^T + bias
inline void linear_bias(cpu::CpuContext& ctx, const Matrix& m, const float* bias, const float* x,
                        int64_t n, float* y) {
  linear(ctx, m, x, n, y);
  add_bias(ctx.isa(), y, bias, n, m.rows);
}

}  // namespace hearth
