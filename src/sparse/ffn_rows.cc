#include "sparse/ffn_rows.h"

#include <algorithm>

#include "ops/input_sparse.h"
#include "ops/linear.h"
#include "ops/sparse_matmul.h"

namespace hearth::sparse {

void all_rows_product(cpu::CpuContext& ctx, const Matrix& m, const Matrix* m_t, const float* xn,
                      int64_t n, FfnScratch& s, float* y, SparseStats& stats) {
  if (m_t && m_t->present() && s.n_inputs >= 0) {
    const SparseInputs in{s.input_idx.data(), s.input_values.data(), m_t->rows,
                          s.input_counts.data()};
    input_major_product(ctx, m, *m_t, in, n, y);
    stats.weight_bytes += rows_bytes(m_t, s.n_inputs);
  } else {
    linear(ctx, m, xn, n, y);
    stats.weight_bytes += m.bytes();
  }
}

void copy_in_file_order(const FfnWeights& w, int64_t n_ff, const float* a, int64_t n, float* dst) {
  if (!w.order) {
    std::copy(a, a + n * n_ff, dst);
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < n_ff; ++j) dst[t * n_ff + w.order[j]] = a[t * n_ff + j];
  }
}

const float* in_file_order(const FfnWeights& w, int64_t n_ff, const float* a, int64_t n,
                           float* dst) {
  if (!w.order) return a;
  copy_in_file_order(w, n_ff, a, n, dst);
  return dst;
}

void down_all(cpu::CpuContext& ctx, const FfnShape& shape, const FfnWeights& w, const float* a,
              int64_t n, float* out, FfnScratch& s, SparseStats& stats) {
  const int64_t n_ff = shape.n_ff, n_embd = shape.n_embd;
  if (w.down && w.down->present()) {
    linear(ctx, *w.down, in_file_order(w, n_ff, a, n, s.file_order.data()), n, out);
    stats.weight_bytes += w.down->bytes();
  } else {
    // Only the neuron-major matrix: an axpy over every neuron, a few tokens at a time so their
    // output rows stay in cache while each weight row is converted once per group.
    const Matrix& dt = *w.down_t;
    for (int64_t t0 = 0; t0 < n; t0 += kMaxSparseBatch) {
      const int64_t tn = std::min(kMaxSparseBatch, n - t0);
      sparse_axpy(ctx, dt.type, dt.data, dt.rows, dt.cols, s.all.data(), n_ff, a + t0 * n_ff, tn,
                  out + t0 * n_embd);
    }
    stats.weight_bytes += dt.bytes();
  }
  add_bias(ctx.isa(), out, w.down_bias, n, n_embd);
}

void add_gathered_bias(const float* bias, const int32_t* idx, int64_t k, int64_t n, float* u) {
  if (!bias) return;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) u[t * k + j] += bias[idx[j]];
  }
}

}  // namespace hearth::sparse
