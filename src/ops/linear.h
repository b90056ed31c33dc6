// Products of a weight Matrix with a batch of activation rows, and bias rows: the two steps every
// block (attention, FFN) takes.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backend/cpu/context.h"
#include "core/weight_views.h"
#include "ops/matmul.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"

namespace hearth {

// y[n, m.rows] = x[n, m.cols] · m^T: matrix-vector for one token, matrix-matrix for a batch. A
// matrix held input-major goes through lane_matmul, which gives matmul's bits; one held as row
// groups through matmul_row_groups.
inline void linear(cpu::CpuContext& ctx, const Matrix& m, const float* x, int64_t n, float* y) {
  if (cpu::MatmulHook* hook = ctx.matmul_hook()) hook->on_matmul(m.data, x, n, m.cols);
  if (m.input_major) {
    lane_matmul(ctx, m.type, m.type, m.data, m.cols, m.rows, x, n, y, /*lane_grouped=*/true,
                static_cast<size_t>(m.stride));
  } else if (m.row_groups) {
    const MatmulPart part{m.data, m.rows, y};
    matmul_row_groups(ctx, m.type, m.cols, {&part, 1}, x, n);
  } else {
    matmul(ctx, m.type, m.data, m.rows, m.cols, x, n, y);
  }
}

// One product of linear_shared: y[n, m.rows] = x · m^T.
struct LinearOut {
  const Matrix* m = nullptr;
  float* y = nullptr;
};

// linear() for up to four matrices of one input x[n, cols] (q, k, v; up and gate): one pass over
// the pool when they share a weight type and layout (ggml's or row groups), one linear() each
// otherwise (or for more matrices).
// The same bits either way.
inline void linear_shared(cpu::CpuContext& ctx, std::initializer_list<LinearOut> outs,
                          const float* x, int64_t n) {
  constexpr size_t kMaxParts = 4;
  if (outs.size() == 0) return;
  const Matrix& first = *outs.begin()->m;
  bool shared = outs.size() <= kMaxParts;
  for (const LinearOut& o : outs) {
    shared = shared && o.m->type == first.type && o.m->cols == first.cols && !o.m->input_major &&
             o.m->row_groups == first.row_groups;
  }
  if (!shared) {
    for (const LinearOut& o : outs) linear(ctx, *o.m, x, n, o.y);
    return;
  }
  MatmulPart parts[kMaxParts];
  size_t count = 0;
  for (const LinearOut& o : outs) {
    if (cpu::MatmulHook* hook = ctx.matmul_hook()) hook->on_matmul(o.m->data, x, n, o.m->cols);
    parts[count++] = {o.m->data, o.m->rows, o.y};
  }
  if (first.row_groups) {
    matmul_row_groups(ctx, first.type, first.cols, {parts, count}, x, n);
  } else {
    matmul_parts(ctx, first.type, first.cols, {parts, count}, x, n);
  }
}

// y[n, width] += bias[width] in every row; nothing when there is no bias.
inline void add_bias(cpu::Isa isa, float* y, const float* bias, int64_t n, int64_t width) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) vec_add(isa, y + t * width, bias, width);
}

}  // namespace hearth
