// Neuron placement: under a device memory budget, which parts of a model live on the device
// (DESIGN.md section 1 and 4). Attention weights and the KV cache come first, layer by layer as
// far as they fit; then the predictors; then FFN neurons by activation frequency, counting each
// neuron's real bytes (its rows of up, gate, down and the predictor's fc2 in their stored types).
// The neuron choice is exact (solve_placement says for what, and the one case where it may not
// be), the solver deterministic, and it never exceeds the budget. It replaces PowerInfer's load-time call to a Python ILP solver
// (../shared/reference/powerinfer.md section 5). placement_cache.h stores its answers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::sparse {

// Bumped whenever the solver can give a different answer for the same request (the placement
// cache is keyed by it).
inline constexpr uint32_t kPlacementSolverVersion = 1;

// What one layer's parts cost on the device, in bytes.
struct LayerCosts {
  uint64_t attention_bytes = 0;  // attention weights (norm, wq, wk, wv, wo) of the layer
  uint64_t kv_bytes = 0;         // the layer's K and V caches for every session it must serve
  uint64_t predictor_bytes = 0;  // fc1 (0 when the placement needs no predictor)
  uint64_t neuron_bytes = 0;     // one neuron: its rows of up, gate, down_t (+ fc2) (+ up bias)
  int64_t n_ff = 0;
  // [n_ff] how often each neuron fired in calibration (blk.N.ffn_act_freq), or empty when the
  // model has no statistics. NaN, infinite and negative values count as 0 (never fired).
  std::vector<float> frequency;
};

enum class PlacementStrategy {
  Neurons,  // attention + KV, predictors, then the most frequently active neurons of any layer
  Layers,   // whole layers in order, as llama.cpp's -ngl offloads (dense baseline)
};

struct PlacementRequest {
  uint64_t budget_bytes = 0;  // what the placed parts may take in all
  PlacementStrategy strategy = PlacementStrategy::Neurons;
  std::vector<LayerCosts> layers;
};

struct LayerPlacement {
  bool attention = false;       // attention weights and KV cache on the device
  // fc1 on the device: only where `hot` is not empty and the layer has a predictor to place
  // (predictor_bytes > 0); a predictor that would serve no hot neuron is neither placed nor charged.
  bool predictor = false;
  std::vector<int32_t> hot;     // ascending neuron ids on the device
  uint64_t bytes = 0;           // what this layer's placed parts take
  // The request's n_ff (added last, so existing initialisers still compile): the cold neurons are
  // the ids below it that are not hot, and the placement cache writes blk.N.gpu_idx [n_ff] from it.
  int64_t n_ff = 0;
};

struct Placement {
  std::vector<LayerPlacement> layers;
  uint64_t budget_bytes = 0;
  uint64_t bytes = 0;             // all placed parts; never above budget_bytes
  // Share of the calibration's activations (sum of frequencies) that the hot neurons cover when
  // every layer with neurons has statistics (whatever the strategy, so that whole layers can be
  // compared with neurons); otherwise the share of neurons placed. 0 when there is nothing to share.
  double hot_share = 0.0;
  // true: the Neurons rule chose the hot neurons from statistics; false: whole layers were placed
  // (the Layers strategy, or the fallback when statistics are missing).
  bool from_statistics = false;
  std::string note;               // one line for the user: the rule used and what was placed
};

// Solves a request. Neurons strategy with statistics: maximises the summed frequency of the hot
// neurons under the budget (exact, see placement.cc); without statistics in any layer: falls back
// to whole layers first (as Layers) and says so in `note`. A neuron is placed only in a layer whose
// attention is placed (the layer's device part needs its input there) and whose predictor, when
// predictor_bytes > 0, is placed too. Deterministic: ties go to the lower layer, then the lower id.
//
// The rules in order (placement.cc has the why):
// - budget 0: nothing is placed.
// - Layers (and the fallback, used when any layer with neurons lacks statistics): in layer order,
//   attention + KV + predictor + all neurons while the whole layer fits; stop at the first misfit.
// - Neurons: attention + KV in layer order while they fit, stopping at the first misfit (a later
//   layer's device part would need the input the host has). Then the predictor of each such layer
//   that has a neuron with frequency > 0, in layer order, skipping one that does not fit. Then the
//   neurons with frequency > 0 of those layers that maximise the summed frequency under what is
//   left (exact for the predictors placed, checked by brute force in the tests; only with three
//   or more distinct neuron_bytes whose gcd is tiny against them may it settle for a greedy
//   answer within a stated bound, which `note` then says). A predictor whose layer got no neuron is
//   dropped and the solve repeated without it. What is left last goes to never-fired neurons of
//   layers already holding hot ones (in layer and id order), since a layer that is whole on the
//   device leaves the host no work.
// Throws hearth::Error for a malformed request: n_ff < 0 or above INT32_MAX, or a non-empty
// frequency list whose length is not n_ff.
Placement solve_placement(const PlacementRequest& request);

}  // namespace hearth::sparse
