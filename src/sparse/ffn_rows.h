// Steps the FFN pipeline's sparse and dense paths share (ffn_pipeline.h): the file-order copies
// of activations and the down projection over every neuron.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "sparse/ffn_scratch.h"
#include "sparse/ffn_types.h"

namespace hearth::sparse {

inline bool has_gate(const FfnWeights& w) { return w.gate && w.gate->present(); }

// Bytes of `rows` rows of m (0 when m is absent).
inline uint64_t rows_bytes(const Matrix* m, int64_t rows) {
  return m && m->present() ? static_cast<uint64_t>(rows) * row_bytes(m->type, m->cols) : 0;
}

// dst[n, n_ff] = a with its columns in the file's neuron order (FfnWeights::order).
void copy_in_file_order(const FfnWeights& w, int64_t n_ff, const float* a, int64_t n, float* dst);
// a[n, n_ff] in the file's order: a itself when the rows are held in that order, else copied
// into dst.
const float* in_file_order(const FfnWeights& w, int64_t n_ff, const float* a, int64_t n,
                           float* dst);

// u[n, k] += bias[idx] in every row (the bias of k gathered neurons); nothing without a bias.
void add_gathered_bias(const float* bias, const int32_t* idx, int64_t k, int64_t n, float* u);

// y[n, m.rows] = xn[n, n_embd] · m^T over every row: through m's input-major copy m_t, each
// token reading only the rows of its own inputs compacted in s (s.n_inputs >= 0), else the dense
// product. Adds the bytes read (the rows some token needs) to stats. No bias.
void all_rows_product(cpu::CpuContext& ctx, const Matrix& m, const Matrix* m_t, const float* xn,
                      int64_t n, FfnScratch& s, float* y, SparseStats& stats);

// out[n, n_embd] = a[n, n_ff] · down^T (+ bias), through whichever layout the file has.
void down_all(cpu::CpuContext& ctx, const FfnShape& shape, const FfnWeights& w, const float* a,
              int64_t n, float* out, FfnScratch& s, SparseStats& stats);

}  // namespace hearth::sparse
