#include "sparse/neuron_rule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/linear.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"
#include "sparse/ffn_rows.h"

namespace hearth::sparse {
namespace {

bool gated(const FfnWeights& w) { return w.gate && w.gate->present(); }

class DenseRule final : public NeuronRule {
 public:
  Selection decide(cpu::CpuContext&, const FfnShape&, const LayerRule&, const FfnWeights&,
                   const float*, const float*, int64_t, FfnScratch&, SparseStats&) const override {
    return Selection{};
  }
};

// Oracle (threshold 0) and Threshold: the activations of the gate (or of up, without a gate), in
// full or over w's subset, those at or below the layer's threshold zeroed.
class MagnitudeRule final : public NeuronRule {
 public:
  explicit MagnitudeRule(bool oracle) : oracle_(oracle) {}

  Selection decide(cpu::CpuContext& ctx, const FfnShape& shape, const LayerRule& rule,
                   const FfnWeights& w, const float* xn, const float*, int64_t n, FfnScratch& s,
                   SparseStats& stats) const override {
    const int64_t n_ff = shape.n_ff;
    const Matrix& m = gated(w) ? *w.gate : *w.up;
    const float* bias = gated(w) ? nullptr : w.up_bias;
    float* const d = s.decided.data();
    const float* up = nullptr;
    if (w.neurons) {
      // Only the subset's rows: the others are a device's, which decides them itself.
      const int64_t kc = w.n_neurons;
      float* const tmp = s.up.data();  // [n, kc], free until the pipeline computes up
      gather_matmul(ctx, m.type, m.data, m.rows, m.cols, w.neurons, kc, xn, n, tmp);
      add_gathered_bias(bias, w.neurons, kc, n, tmp);
      activate(ctx.isa(), shape.act, tmp, n * kc, tmp);
      std::fill(d, d + n * n_ff, 0.0f);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t j = 0; j < kc; ++j) d[t * n_ff + w.neurons[j]] = tmp[t * kc + j];
      }
      stats.weight_bytes += static_cast<uint64_t>(kc) * row_bytes(m.type, m.cols);
    } else if (keeps_every_up(shape, rule, w, n, s)) {
      // Every neuron's up is needed: the gate and up in one pass over the pool, as the dense
      // FFN takes them, up into s.gate (free until the pipeline's gathers, which this skips).
      linear_shared(ctx, {{&m, d}, {w.up, s.gate.data()}}, xn, n);
      stats.weight_bytes += m.bytes() + w.up->bytes();
      activate(ctx.isa(), shape.act, d, n * n_ff, d);
      up = s.gate.data();
    } else {
      all_rows_product(ctx, m, gated(w) ? w.gate_t : w.up_t, xn, n, s, d, stats);
      add_bias(ctx.isa(), d, bias, n, n_ff);
      activate(ctx.isa(), shape.act, d, n * n_ff, d);
    }
    if (rule.threshold > 0.0f) mask_below(d, n * n_ff, rule.threshold);
    Selection sel;
    sel.up = up;
    sel.kind = Selection::Kind::Activations;
    sel.values = d;
    sel.down_threshold = rule.down_threshold;
    sel.exact = oracle_;
    return sel;
  }

 private:
  // Whether the gate selects every neuron of a decode-sized group, so that all of up is read
  // anyway: Threshold mode without a gate threshold (model-wide files) and an activation that is
  // zero only by underflow, the file's matrices read (no input-major copies for this group).
  bool keeps_every_up(const FfnShape& shape, const LayerRule& rule, const FfnWeights& w, int64_t n,
                      const FfnScratch& s) const {
    const bool copies =
        s.n_inputs >= 0 && ((w.gate_t && w.gate_t->present()) || (w.up_t && w.up_t->present()));
    return !oracle_ && gated(w) && rule.threshold == 0.0f && n <= kMaxSparseBatch && !copies &&
           (shape.act == Activation::Silu || shape.act == Activation::Gelu);
  }

  bool oracle_;
};

class PredictorRule final : public NeuronRule {
 public:
  explicit PredictorRule(bool audit) : audit_(audit) {}

  Selection decide(cpu::CpuContext& ctx, const FfnShape& shape, const LayerRule& rule,
                   const FfnWeights& w, const float* xn, const float* p, int64_t n, FfnScratch& s,
                   SparseStats& stats) const override {
    // score[n, n_ff] = fc2 · relu(fc1 · p)
    float* const h = s.hidden.data();
    linear(ctx, *w.fc1, p, n, h);
    activate(ctx.isa(), Activation::Relu, h, n * w.fc1->rows, h);
    linear(ctx, *w.fc2, h, n, s.score.data());
    stats.weight_bytes += w.fc1->bytes() + w.fc2->bytes();
    Selection sel;
    sel.kind = Selection::Kind::Scores;
    sel.values = s.score.data();
    sel.threshold = rule.threshold;
    if (audit_) audit(ctx, shape, w, xn, n, sel, s, stats);
    return sel;
  }

 private:
  // Counts the neurons that truly fire (non-zero activation of the gate, or of up without a
  // gate) and those of them the predictor caught. Measurement only: its weight reads are not
  // counted.
  static void audit(cpu::CpuContext& ctx, const FfnShape& shape, const FfnWeights& w,
                    const float* xn, int64_t n, const Selection& sel, FfnScratch& s,
                    SparseStats& stats) {
    const int64_t n_ff = shape.n_ff;
    float* const g = s.decided.data();
    linear(ctx, gated(w) ? *w.gate : *w.up, xn, n, g);
    if (!gated(w)) add_bias(ctx.isa(), g, w.up_bias, n, n_ff);
    activate(ctx.isa(), shape.act, g, n * n_ff, g);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < n_ff; ++i) {
        if (g[t * n_ff + i] == 0.0f) continue;
        ++stats.audit_true;
        if (sel.fires(t, i, n_ff)) ++stats.audit_hit;
      }
    }
  }

  bool audit_;
};

}  // namespace

std::unique_ptr<NeuronRule> make_neuron_rule(SparseMode mode, bool audit) {
  switch (mode) {
    case SparseMode::Dense: return std::make_unique<DenseRule>();
    case SparseMode::Oracle: return std::make_unique<MagnitudeRule>(/*oracle=*/true);
    case SparseMode::Threshold: return std::make_unique<MagnitudeRule>(/*oracle=*/false);
    case SparseMode::Predictor: return std::make_unique<PredictorRule>(audit);
    case SparseMode::Auto: break;
  }
  fail("the FFN needs a resolved sparse mode, not auto");
}

}  // namespace hearth::sparse
