// Which FFN neurons a group of tokens computes: one rule per mode, each deciding before any row of
// up is read and returning a Selection that the mode-agnostic pipeline (ffn_pipeline.h) follows.
//
//   Dense:      every neuron (a device's subset included) for every token;
//   Oracle:     the neurons whose activation act(gate · x) (act(up · x) without a gate) is not
//               zero, computed in full first;
//   Threshold:  the same with |activation| > the layer's threshold, and of those, the ones whose
//               |act(gate) · up| <= the down threshold skip their down row too (TEAL's rule);
//   Predictor:  the neurons whose score fc2 · relu(fc1 · p) reaches the layer's threshold.
//
// Skipped neurons contribute exactly zero, so a rule changes which terms are summed, never how.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cpu/context.h"
#include "sparse/ffn_scratch.h"
#include "sparse/ffn_types.h"

namespace hearth::sparse {

// A rule's decision for n tokens: whether neuron i (a row position) fires for token t.
struct Selection {
  enum class Kind {
    All,          // every candidate fires
    Scores,       // values[t, i] >= threshold (predictor scores)
    Activations,  // values[t, i] != 0 (the decided activations themselves)
  };
  Kind kind = Kind::All;
  const float* values = nullptr;  // [n, n_ff]
  float threshold = 0.0f;
  // Activations: a's magnitude at or below this skips the neuron's down row too (0: none).
  float down_threshold = 0.0f;
  // The decided activations are the exact ones (Oracle): the down projection must read the
  // weights as the dense product does, so that the result is the dense one bit for bit.
  bool exact = false;
  // Activations: every neuron's up [n, n_ff], where the rule computed it with the gate (one pass
  // over the pool for both); null: the pipeline computes the selected neurons' up itself.
  const float* up = nullptr;

  bool fires(int64_t t, int64_t i, int64_t n_ff) const {
    switch (kind) {
      case Kind::All: return true;
      case Kind::Scores: return values[t * n_ff + i] >= threshold;
      case Kind::Activations: return values[t * n_ff + i] != 0.0f;
    }
    return true;
  }
};

class NeuronRule {
 public:
  virtual ~NeuronRule() = default;
  // Decides by `rule` (layer_rule() of this mode and w) for the tokens xn[n, n_embd] (the FFN's
  // input) and p[n, n_embd] (the predictor's) of layer w, over w's neuron subset when it has one;
  // writes what it computes into s and the weight bytes it reads into stats.
  virtual Selection decide(cpu::CpuContext& ctx, const FfnShape& shape, const LayerRule& rule,
                           const FfnWeights& w, const float* xn, const float* p, int64_t n,
                           FfnScratch& s, SparseStats& stats) const = 0;
};

// The rule of a mode (not Auto). audit (Predictor): also compute the true activations and count
// how many the predictor caught.
std::unique_ptr<NeuronRule> make_neuron_rule(SparseMode mode, bool audit);

}  // namespace hearth::sparse
