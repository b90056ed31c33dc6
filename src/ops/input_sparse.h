// Products whose input had its small elements zeroed (model-wide thresholds): through the
// input-major copy of the weights, reading only the rows of the non-zero inputs, or through the
// row-major matrix, whichever costs less for the batch.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "core/weight_views.h"

namespace hearth {

// The non-zero elements of an input x[n, width], as compact_rows lists them: token t's columns
// idx[t * ld, + counts[t]) (ascending) and values a[t * ld, ...]; `any` columns are non-zero in
// some token.
struct SparseInputs {
  const int32_t* idx = nullptr;
  const float* a = nullptr;
  int64_t ld = 0;
  const int64_t* counts = nullptr;
  int64_t any = 0;
};

// y[n, m.rows] = x[n, m.cols] · m^T, m_t being m's input-major copy [m.cols, m.rows]. Returns
// whether it read m_t (only the rows of the non-zero inputs: `any` rows for the batch) rather
// than m.
// - Float m and m_t: the bits of linear(m) either way (lane_matvec), so the batch takes the
//   cheaper path: m_t token by token for a few tokens, m's matrix product for more.
// - Otherwise m_t, each token's own list through sparse_axpy_each: each token's bits are a lone
//   decode step's, but not those of linear(m).
bool input_sparse_linear(cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t, const float* x,
                         const SparseInputs& in, int64_t n, float* y);

// Whether input_sparse_linear would read m_t for a batch of n tokens: only then does it need the
// lists of non-zero inputs. Otherwise linear(m) over the zeroed input gives its bits.
bool input_sparse_reads_copy(const cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t,
                             int64_t n);

}  // namespace hearth
