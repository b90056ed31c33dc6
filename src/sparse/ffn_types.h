// The plain data of the FFN block: one layer's matrices and thresholds, the sizes an executor is
// built for, and the session's mode.
#pragma once

#include <cstdint>

#include "core/weight_views.h"
#include "hearth/session.h"
#include "hearth/types.h"
#include "ops/activation.h"

namespace hearth::sparse {

inline constexpr int64_t kMaxSparseBatch = 8;
// The sparse modes' down projection holds the neuron lists of this many tokens at a time.
inline constexpr int64_t kDownListBlock = 64;

// The matrices of one layer's FFN. down_t (neuron-major) is required by the sparse modes and by
// files without ffn_down; down is used for matrix-matrix batches when present.
struct FfnWeights {
  const Matrix* gate = nullptr;    // [n_ff, n_embd] or absent
  const Matrix* up = nullptr;      // [n_ff, n_embd]
  const Matrix* down = nullptr;    // [n_embd, n_ff] or absent
  const Matrix* down_t = nullptr;  // [n_ff, n_embd] or absent
  const Matrix* fc1 = nullptr;     // [H, n_embd]  (Predictor mode)
  const Matrix* fc2 = nullptr;     // [n_ff, H]
  const float* up_bias = nullptr;    // [n_ff]   (OPT) or absent
  const float* down_bias = nullptr;  // [n_embd] (OPT) or absent
  int32_t layer = 0;                 // for the observer
  // Predictor: a neuron is active iff its score >= threshold. Threshold (and Oracle, at 0): iff
  // |activation| > threshold.
  float threshold = 0.0f;
  // Threshold: of the active neurons, those with |act(gate) · up| <= down_threshold skip their
  // down row too (TEAL's rule for the down projection's input).
  float down_threshold = 0.0f;
  // Threshold: the elements of the FFN's input whose magnitude is at or below this are zeroed
  // before gate and up see it (TEAL's rule for their input; 0: none).
  float in_threshold = 0.0f;
  // Input-major copies of gate and up ([n_embd, n_ff], InputMajorLayer), which decode steps with
  // an input threshold read only for the inputs left; null where the model has none.
  const Matrix* gate_t = nullptr;
  const Matrix* up_t = nullptr;
  // The neurons this executor may compute (ascending ids), when a device computes the others
  // (hybrid execution: these are the layer's cold neurons); nullptr: all n_ff. Only for runs of
  // at most kMaxSparseBatch tokens. The decisions per neuron are the mode's, as without a subset.
  const int32_t* neurons = nullptr;
  int64_t n_neurons = 0;
  // [n_ff] the file's id of the neuron in each row of gate, up, down_t and fc2 when those are
  // held most-active first (model/neuron_order.h), or null. Neuron ids here (idx, neurons, masks)
  // are row positions; down, which keeps the file's column order, and the observer, which
  // reports by file id, get their activations through it.
  const int32_t* order = nullptr;
};

// How one layer's mode decides which neurons fire, as plain values. The host's rules
// (neuron_rule.h) and a device's FFN over its hot neurons (device/cuda/hot_ffn.h) both decide by
// this struct, made by layer_rule() from the layer's FfnWeights, so the two cannot drift apart.
struct LayerRule {
  SparseMode mode = SparseMode::Dense;  // never Auto
  // Predictor: a neuron fires iff its score >= threshold. Oracle and Threshold: iff its
  // |activation| > threshold (Oracle's is 0 unless a file or the session sets one).
  float threshold = 0.0f;
  // Threshold only: of the firing neurons, those with |act(gate) · up| <= down_threshold skip
  // their down row too (0: none does).
  float down_threshold = 0.0f;
};

// The rule of layer w under `mode` (not Auto).
LayerRule layer_rule(SparseMode mode, const FfnWeights& w);

struct FfnShape {
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t max_hidden = 0;  // widest predictor hidden layer
  int64_t n_batch = 1;     // most tokens per run()
  Activation act = Activation::Silu;
  bool up_relu = false;    // dReLU
  bool reordered = false;  // some layer's FfnWeights::order is set
};

// The shape of a model's FFN with n_ff neurons per layer (all of them, or a device's hot ones) and
// predictors up to max_hidden wide, for runs of up to n_batch tokens.
FfnShape ffn_shape(const ModelConfig& c, int64_t n_ff, int64_t max_hidden, int64_t n_batch,
                   bool reordered = false);

// One sequence's rows of a pass (FfnExecutor::set_chunks). A chunk of at most kMaxSparseBatch
// rows is decided as a decode step unless `dense`: a prompt's rows in a session whose prompts run
// dense, however few they are.
struct FfnChunk {
  int64_t rows = 0;
  bool dense = false;
};

struct FfnMode {
  SparseMode mode = SparseMode::Dense;  // never Auto here
  bool audit = false;  // Predictor: also compute the true activations and count hits
  bool masked_batches = false;  // batches above kMaxSparseBatch apply the mode too (else dense)
  FfnObserver* observer = nullptr;  // Dense only: sees every layer's activations
};

}  // namespace hearth::sparse
