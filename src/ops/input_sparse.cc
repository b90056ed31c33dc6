#include "ops/input_sparse.h"

#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

// Up to this many tokens read a float copy token by token: each reads its own rows, which for a
// few tokens is fewer bytes than all of m. More tokens share m's rows in one matrix product.
constexpr int64_t kLaneTokens = 4;

}  // namespace

bool copy_is_lane_grouped(DType type, DType copy) {
  return dtype_block_size(type) == 1 && dtype_block_size(copy) == 1;
}

bool input_sparse_reads_copy(const Matrix& m, const Matrix& m_t, int64_t n) {
  return n <= kLaneTokens || !copy_is_lane_grouped(m.type, m_t.type);
}

void input_major_product(cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t,
                         const SparseInputs& in, int64_t n, float* y) {
  if (!copy_is_lane_grouped(m.type, m_t.type)) {
    return sparse_axpy_each(ctx, m_t.type, m_t.data, m_t.rows, m_t.cols, in.idx, in.a, in.ld,
                            in.counts, n, y);
  }
  for (int64_t t = 0; t < n; ++t) {
    lane_matvec(ctx, m.type, m_t.type, m_t.data, m_t.rows, m_t.cols, in.idx + t * in.ld,
                in.counts[t], in.a + t * in.ld, y + t * m_t.cols, /*lane_grouped=*/true);
  }
}

}  // namespace hearth
