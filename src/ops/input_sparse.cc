#include "ops/input_sparse.h"

#include "ops/linear.h"
#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

// Up to this many tokens read the copy token by token: each reads its own rows, which for a
// few tokens is fewer bytes than all of m. More tokens share m's rows in one matrix product.
constexpr int64_t kLaneTokens = 4;

bool is_float(const cpu::CpuContext& ctx, DType t) {
  return ctx.kernels().weights(t).dot_lanes > 0;
}

}  // namespace

bool input_sparse_reads_copy(const cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t,
                             int64_t n) {
  return n <= kLaneTokens || !is_float(ctx, m.type) || !is_float(ctx, m_t.type);
}

bool input_sparse_linear(cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t, const float* x,
                         const SparseInputs& in, int64_t n, float* y) {
  if (!input_sparse_reads_copy(ctx, m, m_t, n)) {
    linear(ctx, m, x, n, y);
    return false;
  }
  if (is_float(ctx, m.type) && is_float(ctx, m_t.type)) {
    for (int64_t t = 0; t < n; ++t) {
      lane_matvec(ctx, m.type, m_t.type, m_t.data, m_t.rows, m_t.cols, in.idx + t * in.ld,
                  in.counts[t], in.a + t * in.ld, y + t * m_t.cols);
    }
    return true;
  }
  sparse_axpy_each(ctx, m_t.type, m_t.data, m_t.rows, m_t.cols, in.idx, in.a, in.ld, in.counts, n,
                   y);
  return true;
}

}  // namespace hearth
