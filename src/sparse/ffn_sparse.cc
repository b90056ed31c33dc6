// ffn_sparse (ffn_pipeline.h): only the selected neurons' rows of up, gate and down_t are read.
#include <algorithm>

#include "core/error.h"
#include "ops/linear.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"
#include "sparse/ffn_pipeline.h"
#include "sparse/ffn_rows.h"

namespace hearth::sparse {
namespace {

// Compacts the candidates (w's subset, else all neurons) that fire for any of the n tokens into
// s.idx (ascending) and returns how many; counts each token's own selected neurons into stats
// (when given).
int64_t select(cpu::Isa isa, const FfnShape& shape, const FfnWeights& w, const Selection& sel,
               int64_t n, FfnScratch& s, SparseStats* stats) {
  const int32_t* cand = w.neurons ? w.neurons : s.all.data();
  const int64_t n_cand = w.neurons ? w.n_neurons : shape.n_ff;
  int32_t* const idx = s.idx.data();
  int64_t k = 0;
  if (n == 1 && sel.kind == Selection::Kind::Scores) {
    // One token's predictor decision, the common decode step: branch-free, since the outcomes
    // are random and a branch per neuron would mispredict about as often as it fires.
    if (!w.neurons) {
      k = select_at_least(isa, sel.values, n_cand, sel.threshold, idx);
    } else {
      for (int64_t c = 0; c < n_cand; ++c) {
        idx[k] = cand[c];
        k += sel.values[cand[c]] >= sel.threshold ? 1 : 0;
      }
    }
    if (stats) stats->neurons_active += static_cast<uint64_t>(k);
    return k;
  }
  if (n == 1 && sel.kind == Selection::Kind::Activations && !w.neurons) {
    // One token's magnitude decision (a neuron fires where its value is not zero), in one
    // branch-free pass: it runs on one thread while the pool waits.
    for (int64_t i = 0; i < n_cand; ++i) {
      idx[k] = static_cast<int32_t>(i);
      k += sel.values[i] != 0.0f ? 1 : 0;
    }
    if (stats) stats->neurons_active += static_cast<uint64_t>(k);
    return k;
  }
  uint64_t active = 0;
  for (int64_t c = 0; c < n_cand; ++c) {
    const int32_t i = cand[c];
    int64_t hits = 0;
    for (int64_t t = 0; t < n; ++t) hits += sel.fires(t, i, shape.n_ff) ? 1 : 0;
    if (hits) idx[k++] = i;
    active += static_cast<uint64_t>(hits);
  }
  if (stats) stats->neurons_active += active;
  return k;
}

// a[t, j] (in s.up) = act(gate)[t, idx_j] · up[t, idx_j] (or act(up) without a gate), from the
// rule's activations, where the unselected ones are zero already.
void decided_activations(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                         const Selection& sel, int64_t k, FfnScratch& s, SparseStats& stats) {
  const int64_t n_ff = shape.n_ff, n = g.n;
  const int32_t* idx = s.idx.data();
  float* const a = s.up.data();
  if (!has_gate(g.w)) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) a[t * k + j] = sel.values[t * n_ff + idx[j]];
    }
    return;
  }
  const Matrix& up = *g.w.up;
  // Every neuron selected (model-wide thresholds: a SiLU or GELU gate is never exactly zero), so
  // idx is the identity: the rule's values and up's products are used as they lie, without the
  // index copies, which run on one thread while the pool waits.
  const bool every = k == n_ff;
  if (sel.up) {
    // The rule computed every neuron's up with the gate (and counted its bytes).
    if (every) {
      std::copy(sel.up, sel.up + n * n_ff, a);
    } else {
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t j = 0; j < k; ++j) a[t * k + j] = sel.up[t * n_ff + idx[j]];
      }
    }
  } else if ((g.w.up_t && g.w.up_t->present() && s.n_inputs >= 0) || up.input_major) {
    // Every neuron's up through the input-major copy (its input's zeros are what it skips, or a
    // product over all of it where up is held only that way), then the selected ones picked out.
    float* const full = every ? a : s.gate.data();  // [n, n_ff]; gate's is free by now
    all_rows_product(ctx, up, g.w.up_t, g.xn, n, s, full, stats);
    if (!every) {
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t j = 0; j < k; ++j) a[t * k + j] = full[t * n_ff + idx[j]];
      }
    }
  } else {
    gather_matmul(ctx, up.type, up.data, up.rows, up.cols, idx, k, g.xn, n, a);
    stats.weight_bytes += rows_bytes(&up, k);
  }
  add_gathered_bias(g.w.up_bias, idx, k, n, a);
  if (shape.up_relu) activate(ctx.isa(), Activation::Relu, a, n * k, a);
  if (every) {
    vec_mul(ctx.isa(), a, sel.values, n * n_ff);
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) a[t * k + j] *= sel.values[t * n_ff + idx[j]];
  }
}

// a[t, j] (in s.up) for the selected neurons: up and gate gathered over the union of the
// tokens' sets, then each token's neurons that its own rule did not select zeroed.
void gathered_activations(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                          const Selection& sel, int64_t k, FfnScratch& s, SparseStats& stats) {
  const FfnWeights& w = g.w;
  const int64_t n = g.n;
  const int32_t* idx = s.idx.data();
  float* const a = s.up.data();
  float* const gate = s.gate.data();
  const Matrix& up = *w.up;
  const bool gated = has_gate(w);
  // Held input-major only where model-wide thresholds decide every neuron (decided_activations).
  if (up.input_major || (gated && w.gate->input_major)) {
    fail("ffn: gathered rows of an input-major up or gate");
  }
  if (gated && w.gate->type == up.type) {
    gather_matmul2(ctx, up.type, up.data, w.gate->data, up.rows, up.cols, idx, k, g.xn, n, a,
                   gate);
  } else {
    gather_matmul(ctx, up.type, up.data, up.rows, up.cols, idx, k, g.xn, n, a);
    if (gated) {
      gather_matmul(ctx, w.gate->type, w.gate->data, w.gate->rows, w.gate->cols, idx, k, g.xn,
                    n, gate);
    }
  }
  add_gathered_bias(w.up_bias, idx, k, n, a);
  stats.weight_bytes += rows_bytes(&up, k) + rows_bytes(w.gate, k);
  if (gated) {
    if (shape.up_relu) activate(ctx.isa(), Activation::Relu, a, n * k, a);
    glu(ctx, shape.act, gate, a, n * k, a);
  } else {
    activate(ctx.isa(), shape.act, a, n * k, a);
  }
  if (n > 1 && sel.kind != Selection::Kind::All) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        if (!sel.fires(t, idx[j], shape.n_ff)) a[t * k + j] = 0.0f;
      }
    }
  }
}

}  // namespace

void ffn_sparse(cpu::CpuContext& ctx, const FfnShape& shape, const FfnGroup& g,
                const Selection& sel, FfnScratch& s, SparseStats& stats) {
  if (g.n > kMaxSparseBatch) fail("ffn_sparse: ", g.n, " tokens in one sparse group");
  // Two stages (Threshold): the neurons reaching the down projection are counted below.
  const bool two_stage = sel.down_threshold > 0.0f;
  const int64_t k = select(ctx.isa(), shape, g.w, sel, g.n, s, two_stage ? nullptr : &stats);
  if (sel.kind == Selection::Kind::Activations) {
    decided_activations(ctx, shape, g, sel, k, s, stats);
  } else {
    gathered_activations(ctx, shape, g, sel, k, s, stats);
  }
  float* const a = s.up.data();
  if (two_stage) stats.neurons_active += mask_below(a, g.n * k, sel.down_threshold);
  down_each_token(ctx, shape, g, sel, a, s.idx.data(), k, s, stats);
}

}  // namespace hearth::sparse
