// The FFN after a rule has decided (neuron_rule.h), the same for every mode:
//   up (and gate) products -> activation -> down, as an axpy over the selected neurons' rows of
//   the neuron-major down_t or as the dense product, by density.
//
// ffn_sparse (decode steps, n <= kMaxSparseBatch): the union of the tokens' selected neurons is
// compacted into one ascending index list, up/gate rows are gathered, and each token keeps only
// its own neurons. ffn_dense (any n): every row of up/gate in one matrix-matrix product, the
// selection then masking the activations per token (a prompt in a masked mode, and Dense).
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

// observer: sees the activations (Dense selections only).
void ffn_dense(cpu::CpuContext& ctx, const FfnShape& shape, FfnObserver* observer,
               const FfnGroup& g, const Selection& sel, FfnScratch& s, SparseStats& stats);

}  // namespace hearth::sparse
