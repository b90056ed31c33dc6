// Neuron placement: under a device memory budget, which parts of a model live on the device
// (DESIGN.md section 1 and 4). Attention weights and the KV cache come first, layer by layer as
// far as they fit; then the predictors; then FFN neurons by activation frequency, counting each
// neuron's real bytes (its rows of up, gate, down and the predictor's fc2 in their stored types).
// The solver is exact, deterministic and never exceeds the budget. It replaces PowerInfer's
// load-time call to a Python ILP solver (../shared/reference/powerinfer.md section 5).
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
  // model has no statistics.
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
  bool predictor = false;       // fc1 on the device (only where `hot` is not empty)
  std::vector<int32_t> hot;     // ascending neuron ids on the device
  uint64_t bytes = 0;           // what this layer's placed parts take
};

struct Placement {
  std::vector<LayerPlacement> layers;
  uint64_t budget_bytes = 0;
  uint64_t bytes = 0;             // all placed parts; never above budget_bytes
  // Share of the calibration's activations (sum of frequencies) that the hot neurons cover; with
  // no statistics, the share of neurons placed.
  double hot_share = 0.0;
  bool from_statistics = false;   // false: the fallback rule was used
  std::string note;               // one line for the user: the rule used and what was placed
};

// Solves a request. Neurons strategy with statistics: maximises the summed frequency of the hot
// neurons under the budget (exact, see placement.cc); without statistics in any layer: falls back
// to whole layers first (as Layers) and says so in `note`. A neuron is placed only in a layer whose
// attention is placed (the layer's device part needs its input there) and whose predictor, when
// predictor_bytes > 0, is placed too. Deterministic: ties go to the lower layer, then the lower id.
Placement solve_placement(const PlacementRequest& request);

}  // namespace hearth::sparse
