// down_each_token (ffn_pipeline.h): the down projection of the sparse modes, token by token.
#include <algorithm>

#include "core/error.h"
#include "ops/linear.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"
#include "sparse/ffn_pipeline.h"
#include "sparse/ffn_rows.h"
#include "sparse/neuron_major.h"

namespace hearth::sparse {
namespace {

// The neurons token t selected, out of the group's `lda` candidates: the ones left after the down
// threshold (two stages), else the ones its rule fired for, zero activations included, as a
// decode step of t alone lists them.
int64_t selected(const Selection& sel, const float* row, const int32_t* neuron, int64_t lda,
                 int64_t t, int64_t n_ff) {
  int64_t k = 0;
  if (sel.down_threshold > 0.0f) {
    for (int64_t j = 0; j < lda; ++j) k += row[j] != 0.0f ? 1 : 0;
  } else {
    for (int64_t j = 0; j < lda; ++j) k += sel.fires(t, neuron ? neuron[j] : j, n_ff) ? 1 : 0;
  }
  return k;
}

// Whether a token with k selected neurons streams all of ffn_down instead of the axpy: always
// where the layer has no neuron-major copy (none pays for its calibrated shares). An exact
// selection over a quantized ffn_down always does: the dense product rounds the activations to 8
// bits per block before meeting the weights, which no neuron-major copy can reproduce (the skipped
// neurons are exact zeros, so the result is the dense one bit for bit).
bool streams_down(const FfnWeights& w, const Selection& sel, int64_t k, int64_t n_ff) {
  if (!w.down || !w.down->present()) return false;
  if (!w.down_t->present()) return true;  // no copy where it would not pay (neuron_major.h)
  return (sel.exact && dtype_block_size(w.down->type) > 1) ||
         k > down_crossover(*w.down, *w.down_t) * n_ff;
}

// Where the results of the group's tokens tokens[0, n) go: straight into out when they are
// consecutive rows (null tokens: the whole group), else into s.down_out, for put_rows.
float* rows_for(const FfnGroup& g, const int32_t* tokens, int64_t n, int64_t n_embd,
                FfnScratch& s) {
  if (!tokens) return g.out;
  if (tokens[n - 1] - tokens[0] == n - 1) return g.out + tokens[0] * n_embd;
  return s.down_out.data();
}

// Copies y's rows to the tokens' rows of out, unless rows_for had them written there already.
void put_rows(const FfnGroup& g, const int32_t* tokens, int64_t n, int64_t n_embd, const float* y) {
  if (!tokens || y == g.out + tokens[0] * n_embd) return;
  for (int64_t r = 0; r < n; ++r) std::copy_n(y + r * n_embd, n_embd, g.out + tokens[r] * n_embd);
}

// out[t] for the group's tokens tokens[0, nd) (null: all of them): their activations scattered
// into full rows in the file's neuron order, then one dense product over ffn_down for all.
void down_dense_tokens(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                       const float* a, const int32_t* neuron, int64_t lda, const int32_t* tokens,
                       int64_t nd, FfnScratch& s, SparseStats& stats) {
  const int64_t n_ff = shape.n_ff;
  const int32_t* order = g.w.order;
  float* const full = s.file_order.data();  // [nd, n_ff]
  std::fill(full, full + nd * n_ff, 0.0f);
  for (int64_t d = 0; d < nd; ++d) {
    const float* row = a + (tokens ? tokens[d] : d) * lda;
    float* const dst = full + d * n_ff;
    for (int64_t j = 0; j < lda; ++j) {
      const int32_t i = neuron ? neuron[j] : static_cast<int32_t>(j);
      dst[order ? order[i] : i] = row[j];
    }
  }
  float* const y = rows_for(g, tokens, nd, shape.n_embd, s);
  linear(ctx, *g.w.down, full, nd, y);
  put_rows(g, tokens, nd, shape.n_embd, y);
  stats.weight_bytes += g.w.down->bytes();
}

// out[t] for the tokens listed in s.list_tokens[0, nl): the axpy over each one's own list (in
// s.down_idx / s.down_coef, row stride n_ff), all of them in one pass.
void down_listed_tokens(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g, int64_t nl,
                        FfnScratch& s) {
  const Matrix& dt = *g.w.down_t;
  const int32_t* tokens = s.list_tokens.data();
  float* const y = rows_for(g, tokens, nl, shape.n_embd, s);
  sparse_axpy_each(ctx, dt.type, dt.data, dt.rows, dt.cols, s.down_idx.data(), s.down_coef.data(),
                   shape.n_ff, s.down_counts.data(), nl, y);
  put_rows(g, tokens, nl, shape.n_embd, y);
}

}  // namespace

void down_each_token(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                     const Selection& sel, const float* a, const int32_t* neuron, int64_t lda,
                     FfnScratch& s, SparseStats& stats) {
  const FfnWeights& w = g.w;
  const int64_t n_ff = shape.n_ff, n_embd = shape.n_embd;
  const Matrix& dt = *w.down_t;
  if (sel.kind == Selection::Kind::All) {
    // Every token has every candidate (Dense over a device's subset): one pass over their rows
    // for the whole group. The sum with the device's part is not batch-invariant anyway.
    if (streams_down(w, sel, lda, n_ff)) {
      down_dense_tokens(ctx, shape, g, a, neuron, lda, nullptr, g.n, s, stats);
    } else {
      sparse_axpy(ctx, dt.type, dt.data, dt.rows, dt.cols, neuron ? neuron : s.all.data(), lda, a,
                  g.n, g.out);
      stats.weight_bytes += rows_bytes(&dt, lda);
    }
    add_bias(ctx.isa(), g.out, w.down_bias, g.n, n_embd);
    return;
  }
  int64_t nd = 0, nl = 0;
  for (int64_t t = 0; t < g.n; ++t) {
    const float* row = a + t * lda;
    if (streams_down(w, sel, selected(sel, row, neuron, lda, t, n_ff), n_ff)) {
      s.down_tokens[static_cast<size_t>(nd++)] = static_cast<int32_t>(t);
      continue;
    }
    // Only the token's non-zero coefficients, so that the axpy sees the same list whichever
    // group the token came in (the kernel's chunks and 8-bit groups follow that list).
    int32_t* const idx = s.down_idx.data() + nl * n_ff;
    float* const coef = s.down_coef.data() + nl * n_ff;
    const int64_t k = compact_row(row, lda, neuron, idx, coef);  // lda <= n_ff places
    s.down_counts[static_cast<size_t>(nl)] = k;
    s.list_tokens[static_cast<size_t>(nl++)] = static_cast<int32_t>(t);
    stats.weight_bytes += rows_bytes(&dt, k);
    if (nl == kDownListBlock) {
      down_listed_tokens(ctx, shape, g, nl, s);
      nl = 0;
    }
  }
  if (nl > 0) down_listed_tokens(ctx, shape, g, nl, s);
  if (nd > 0) down_dense_tokens(ctx, shape, g, a, neuron, lda, s.down_tokens.data(), nd, s, stats);
  add_bias(ctx.isa(), g.out, w.down_bias, g.n, n_embd);
}

}  // namespace hearth::sparse
