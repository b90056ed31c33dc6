#include "sparse/ffn.h"

#include <algorithm>

#include "core/error.h"
#include "ops/input_sparse.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"
#include "sparse/ffn_pipeline.h"

namespace hearth::sparse {

FfnShape ffn_shape(const ModelConfig& c, int64_t n_ff, int64_t max_hidden, int64_t n_batch,
                   bool reordered) {
  FfnShape s;
  s.n_embd = c.n_embd;
  s.n_ff = n_ff;
  s.max_hidden = max_hidden;
  s.n_batch = n_batch;
  s.act = to_activation(c.ffn_act);
  s.up_relu = c.ffn_up_relu;
  s.reordered = reordered;
  return s;
}

LayerRule layer_rule(SparseMode mode, const FfnWeights& w) {
  LayerRule r;
  r.mode = mode;
  r.threshold = mode == SparseMode::Dense ? 0.0f : w.threshold;
  r.down_threshold = mode == SparseMode::Threshold ? w.down_threshold : 0.0f;
  return r;
}

FfnExecutor::FfnExecutor(const FfnShape& shape, const FfnMode& mode)
    : shape_(shape),
      mode_(mode),
      rule_(make_neuron_rule(mode.mode, mode.audit)),
      dense_rule_(make_neuron_rule(SparseMode::Dense, false)),
      scratch_(shape, mode) {}

void FfnExecutor::run(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p,
                      int64_t n, float* out, SparseStats& stats) {
  const auto small = [](const FfnChunk& c) { return c.rows <= kMaxSparseBatch && !c.dense; };
  if (chunks_.size() <= 1 || mode_.mode == SparseMode::Dense) {
    // (Dense mode marks no chunk dense, so only a lone chunk can be.)
    const bool group_small = n <= kMaxSparseBatch && (chunks_.empty() || !chunks_[0].dense);
    run_group(ctx, w, xn, p, n, group_small, out, stats);
    return;
  }
  // Groups of consecutive chunks decided alike: short ones up to kMaxSparseBatch rows together
  // (never split: a chunk's tokens share their neurons as they would alone), the others all
  // together.
  const int64_t n_embd = shape_.n_embd;
  int64_t t0 = 0;
  for (size_t c = 0; c < chunks_.size();) {
    const bool group_small = small(chunks_[c]);
    int64_t tn = 0;
    while (c < chunks_.size() && small(chunks_[c]) == group_small &&
           (!group_small || tn + chunks_[c].rows <= kMaxSparseBatch)) {
      tn += chunks_[c++].rows;
    }
    run_group(ctx, w, xn + t0 * n_embd, p + t0 * n_embd, tn, group_small, out + t0 * n_embd, stats);
    t0 += tn;
  }
}

void FfnExecutor::run_group(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                            const float* p, int64_t n, bool small, float* out, SparseStats& stats) {
  stats.neurons_total += static_cast<uint64_t>(n * shape_.n_ff);
  if (w.neurons && !small) {
    fail("FfnExecutor: a neuron subset needs batches of at most ", kMaxSparseBatch, " tokens");
  }
  const bool decides = small || mode_.masked_batches;
  const NeuronRule& rule = decides ? *rule_ : *dense_rule_;
  const LayerRule layer = layer_rule(decides ? mode_.mode : SparseMode::Dense, w);
  const int64_t neurons = n * (w.neurons ? w.n_neurons : shape_.n_ff);
  const bool thresholds = decides && mode_.mode == SparseMode::Threshold;
  scratch_.n_inputs = -1;
  if (thresholds) xn = threshold_input(w, xn, n, stats);
  const uint64_t active_before = stats.neurons_active;
  const Selection sel = rule.decide(ctx, shape_, layer, w, xn, p, n, scratch_, stats);
  const FfnGroup g{w, xn, p, n, out};
  // A subset is gathered even when every neuron fires: its rows are scattered over the matrices.
  if (small && (sel.kind != Selection::Kind::All || w.neurons)) {
    ffn_sparse(ctx, shape_, g, sel, scratch_, stats);
  } else {
    ffn_dense(ctx, shape_, mode_.observer, g, sel, scratch_, stats);
  }
  if (thresholds) {
    // Each neuron skipped by the down threshold skips its n_embd weights of down.
    const uint64_t active = stats.neurons_active - active_before;
    stats.count_inputs(w.layer, static_cast<uint64_t>(neurons * shape_.n_embd),
                       (static_cast<uint64_t>(neurons) - active) * shape_.n_embd);
  }
}

const float* FfnExecutor::threshold_input(const FfnWeights& w, const float* xn, int64_t n,
                                          SparseStats& stats) {
  // Gate and up skip the columns of the zeroed elements, counted per element as its weights in
  // every neuron's rows. At threshold 0 nothing is zeroed, but the weights still count.
  const int64_t elements = n * shape_.n_embd;
  int64_t kept = elements;
  if (w.in_threshold > 0.0f) {
    float* const masked = scratch_.input.data();
    std::copy_n(xn, elements, masked);
    kept = mask_below(masked, elements, w.in_threshold);
    xn = masked;
    // Rows decided sparsely read only the rows of their inputs left from the input-major
    // copies, where the batch reads them (input_sparse_reads_copy).
    if (!w.neurons && w.up_t && w.up_t->present() && input_sparse_reads_copy(*w.up, *w.up_t, n)) {
      scratch_.n_inputs = compact_rows(xn, n, shape_.n_embd, scratch_.input_idx.data(),
                                       scratch_.input_values.data(), scratch_.input_counts.data());
    }
  }
  const int64_t per_element =
      (w.neurons ? w.n_neurons : shape_.n_ff) * (w.gate && w.gate->present() ? 2 : 1);
  stats.count_inputs(w.layer, static_cast<uint64_t>(elements * per_element),
                     static_cast<uint64_t>((elements - kept) * per_element));
  return xn;
}

}  // namespace hearth::sparse
