// Products whose input had its small elements zeroed (model-wide thresholds) through the
// input-major copy of the weights, reading only the rows of the non-zero inputs; or, where that
// gives the same bits and costs more, through the row-major matrix (linear()).
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "core/weight_views.h"

namespace hearth {

// The non-zero elements of an input x[n, width], as compact_rows lists them: token t's columns
// idx[t * ld, + counts[t]) (ascending) and values a[t * ld, ...].
struct SparseInputs {
  const int32_t* idx = nullptr;
  const float* a = nullptr;
  int64_t ld = 0;
  const int64_t* counts = nullptr;
};

// Whether a batch of n tokens should read m_t, m's input-major copy [m.cols, m.rows], for its
// product over a zeroed input (and so needs the lists of non-zero inputs). For float m and m_t
// either matrix gives the same bits (lane_matvec), so only a few tokens read m_t, each its own
// rows; more share m's rows in linear(m). Quantized copies round differently from m, so every
// batch that is to give its tokens their decode steps' bits reads them.
bool input_sparse_reads_copy(const Matrix& m, const Matrix& m_t, int64_t n);

// Whether a copy of type `copy` of a matrix of type `type` is read by lane_matvec (both float),
// which wants its rows lane-grouped (lane_grouped_row), rather than by sparse_axpy_each, which
// wants them in input order. The copies are made (sparse/neuron_major.h) and read by this rule.
bool copy_is_lane_grouped(DType type, DType copy);

// y[n, m.rows] = x · m^T for the zeroed input whose non-zero elements are `in`, through m_t,
// reading only the rows of those inputs: float copies (whose rows are lane-grouped,
// lane_grouped_row) token by token in m's sums' lane order (lane_matvec: the bits of
// linear(m)), quantized ones (rows in input order) through sparse_axpy_each (each token a lone
// decode step's bits).
void input_major_product(cpu::CpuContext& ctx, const Matrix& m, const Matrix& m_t,
                         const SparseInputs& in, int64_t n, float* y);

}  // namespace hearth
