// The FFN after a rule has decided (neuron_rule.h), the same for every mode:
//   up (and gate) products -> activation -> down, as an axpy over the selected neurons' rows of
//   the neuron-major down_t or as the dense product, by each token's density (down_each_token).
//
// ffn_sparse (decode steps, n <= kMaxSparseBatch): the union of the tokens' selected neurons is
// compacted into one ascending index list, up/gate rows are gathered, and each token keeps only
// its own neurons. ffn_dense (any n): every row of up/gate in one matrix-matrix product, the
// selection then masking the activations per token (a prompt in a masked mode, and Dense). The
// gathered and the dense products give a row the same bits, so both paths compute, token by
// token, the same function.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "sparse/ffn_scratch.h"
#include "sparse/ffn_types.h"
#include "sparse/neuron_rule.h"

namespace hearth::sparse {

// One group of rows: out[n, n_embd] = FFN of layer w over xn[n, n_embd]; p[n, n_embd] is the
// predictor's input (for the observer).
struct FfnGroup {
  const FfnWeights& w;
  const float* xn;
  const float* p;
  int64_t n;
  float* out;
};

void ffn_sparse(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                const Selection& sel, FfnScratch& s, SparseStats& stats);

// out[n, n_embd] = Σ_j a[t, j] · down_t[neuron_j] (+ bias) for each token t of the group, where
// a[n, lda] holds the activations of the candidates neuron[0, lda) (null: every neuron, lda =
// n_ff), zero where a token's rule did not select them. Each token's result is what a decode step
// of that token alone computes, bit for bit, whatever group it comes in: the same choice between
// the axpy over its own non-zero coefficients and the dense product over ffn_down (by its own count
// of selected neurons), and the same order of summation. A Dense selection (a device's subset)
// shares one pass over the rows instead.
void down_each_token(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                     const Selection& sel, const float* a, const int32_t* neuron, int64_t lda,
                     FfnScratch& s, SparseStats& stats);

// observer: sees the activations (Dense selections only).
void ffn_dense(cpu::CpuContext& ctx, const FfnShape& shape, FfnObserver* observer,
               const FfnGroup& g, const Selection& sel, FfnScratch& s, SparseStats& stats);

}  // namespace hearth::sparse
