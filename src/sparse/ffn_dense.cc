// ffn_dense (ffn_pipeline.h): every row of up/gate, the selection masking the activations, and
// the down projection over all neurons.
#include <algorithm>

#include "ops/linear.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"
#include "sparse/ffn_pipeline.h"
#include "sparse/ffn_rows.h"

namespace hearth::sparse {
namespace {

// The observer's view (Dense): act(gate) on its own, then a = act(gate) · up, each reported in
// the file's neuron order.
void observed_activations(cpu::CpuContext& ctx, const FfnShape& shape, FfnObserver& observer,
                          const FfnGroup& g, FfnScratch& s) {
  const int64_t total = g.n * shape.n_ff;
  const bool gated = has_gate(g.w);
  float* const a = s.up.data();
  float* const src = gated ? s.gate.data() : a;
  activate(ctx.isa(), shape.act, src, total, src);
  copy_in_file_order(g.w, shape.n_ff, src, g.n, s.observed.data());
  if (gated) vec_mul(ctx.isa(), a, src, total);
  observer.observe(g.w.layer, g.n, g.p, s.observed.data(),
                   in_file_order(g.w, shape.n_ff, a, g.n, s.file_order.data()));
}

// a[n, n_ff] (in s.up) = act(gate) ⊙ up, or act(up), from the products in s.gate and s.up.
void activations(cpu::CpuContext& ctx, const FfnShape& shape, const FfnWeights& w, int64_t n,
                 FfnScratch& s) {
  const int64_t total = n * shape.n_ff;
  float* const a = s.up.data();
  if (has_gate(w)) {
    glu(ctx, shape.act, s.gate.data(), a, total, a);
  } else {
    activate(ctx.isa(), shape.act, a, total, a);
  }
}

}  // namespace

void ffn_dense(cpu::CpuContext& ctx, const FfnShape& shape, FfnObserver* observer,
               const FfnGroup& g, const Selection& sel, FfnScratch& s, SparseStats& stats) {
  const FfnWeights& w = g.w;
  const int64_t n_ff = shape.n_ff, total = g.n * n_ff;
  const bool gated = has_gate(w);
  float* const a = s.up.data();
  const bool decided = sel.kind == Selection::Kind::Activations;
  if (decided && !gated) {
    // The rule's activations are act(up) already.
    std::copy(sel.values, sel.values + total, a);
  } else {
    if (gated && !decided) {
      linear_shared(ctx, {{w.up, a}, {w.gate, s.gate.data()}}, g.xn, g.n);
      stats.weight_bytes += w.gate->bytes() + w.up->bytes();
    } else {
      all_rows_product(ctx, *w.up, w.up_t, g.xn, g.n, s, a, stats);
    }
    add_bias(ctx.isa(), a, w.up_bias, g.n, n_ff);
    if (gated && shape.up_relu) activate(ctx.isa(), Activation::Relu, a, total, a);
  }

  uint64_t active = 0;
  switch (sel.kind) {
    case Selection::Kind::All:
      if (observer) {
        observed_activations(ctx, shape, *observer, g, s);
      } else {
        activations(ctx, shape, w, g.n, s);
      }
      active = static_cast<uint64_t>(total);
      break;
    case Selection::Kind::Scores:
      activations(ctx, shape, w, g.n, s);
      for (int64_t i = 0; i < total; ++i) {
        if (sel.values[i] >= sel.threshold) {
          ++active;
        } else {
          a[i] = 0.0f;
        }
      }
      break;
    case Selection::Kind::Activations:
      if (gated) vec_mul(ctx.isa(), a, sel.values, total);
      active = static_cast<uint64_t>(
          sel.down_threshold > 0.0f
              ? mask_below(a, total, sel.down_threshold)
              : std::count_if(sel.values, sel.values + total, [](float v) { return v != 0.0f; }));
      break;
  }
  stats.neurons_active += active;
  if (sel.kind == Selection::Kind::All) {
    down_all(ctx, shape, w, a, g.n, g.out, s, stats);
  } else {
    down_each_token(ctx, shape, g, sel, a, nullptr, n_ff, s, stats);
  }
}

}  // namespace hearth::sparse
