// Model-wide input sparsity (TEAL, arXiv 2408.14690): per layer, a magnitude threshold on the
// input of every projection, so that a decode step can skip the weights that small input elements
// would multiply. A block has four such inputs (InputKind): the normed input of q, k and v; wo's
// input; the normed input of gate and up; and down's input act(gate) · up.
//
// Calibration (`hearth calibrate --sparsity S`, the default scope):
//   1. profile: a dense session runs over the calibration tokens while a MatmulObserver keeps a
//      log-scale histogram of |x| per layer and input; its quantile s is the threshold that skips
//      a share s of that input's elements;
//   2. allocate: group by group of layers, from the first, a greedy search raises one input's
//      share by a step at a time, taking the step that costs the least held-out divergence from
//      the dense model (calib/heldout_divergence.h) per unit of decode time it saves (or, with
//      Allocate::Weights, per weight it skips), until the group's layers skip a share S of their
//      thresholded weights (the last step is cut to land on S). Where one step would save no
//      time (an input-major copy read above its crossover is slower than the file's matrix), the
//      candidate is as many steps as it takes to save some. Groups
//      already allocated keep their thresholds while a later one is searched; later groups stay
//      dense. With one layer per group this is TEAL's block-wise greedy, with the whole model's
//      divergence as the error in place of the block's output error; with one group for all layers
//      every layer gets the same shares, and the search costs a model evaluation per candidate step
//      instead of n_layer of them;
//   3. correct: the shares come from the dense model's activations, and sparsifying earlier
//      layers shifts a layer's inputs, so each layer whose held-out sparsity misses the target by
//      more than half a point has its shares rescaled by target / achieved, then the model is
//      measured again (at most three rounds).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hearth/model.h"

namespace hearth::calib {

// "attn_in", "attn_out", "ffn_in", "down_in".
const char* input_kind_name(int kind);

// The threshold field of each kind.
float& threshold_of(LayerThresholds& t, int kind);

// Per kind: the elements of its input per token and the weights each element multiplies.
struct InputShape {
  std::array<int64_t, kInputKinds> elements{};
  std::array<int64_t, kInputKinds> fan_out{};
  int64_t weights(int kind) const { return elements[kind] * fan_out[kind]; }
  int64_t total_weights() const;
};
InputShape input_shape(const ModelConfig& c);

// What the greedy search weighs a step's held-out divergence against: the decode time it saves,
// by the costs of the paths a decode step takes (sparse::input_read: an input's copies save
// nothing until few enough of their rows are read), or the weights it skips (TEAL's). Speed
// weighs by weights on models narrower than SessionOptions::input_major_min_width, whose decode
// steps read no copies and so save no time by any allocation.
enum class Allocate { Speed, Weights };

struct InputSparsityOptions {
  double sparsity = 0.5;       // the share of each layer's thresholded weights to skip
  int64_t window = 256;        // tokens per evaluation window
  int64_t layer_groups = 0;    // layers allocated together: 0 = auto (see allocate_input_sparsity)
  double step = 0.05;          // share added to one input per greedy step
  double max_share = 0.95;     // no input skips more of its elements than this
  Allocate allocate = Allocate::Speed;
  int n_threads = 1;
  std::function<void(const std::string&)> log;
};

struct InputAllocation {
  std::vector<LayerThresholds> thresholds;                   // [n_layer]
  // [n_layer] the shares of each input's calibration elements skipped (after the correction)
  std::vector<std::array<double, kInputKinds>> shares;
  std::vector<double> achieved;  // [n_layer] share of thresholded weights skipped on held-out text
  double dense_nll = 0, sparse_nll = 0;  // mean held-out loss per token
  double divergence = 0;                 // mean held-out KL(dense || sparse) per position
  int64_t evaluations = 0;               // model evaluations the search made
  int64_t layer_groups = 0;
  Allocate allocate = Allocate::Speed;  // what the search weighed (Weights on narrow models)
};

// Calibrates a model: profiles `train`, then allocates the shares on `heldout` (the search's
// divergence, and the achieved sparsity). Throws hearth::Error for a model whose products the
// profile cannot see (no ffn_down) or a target the inputs cannot reach.
InputAllocation allocate_input_sparsity(const std::shared_ptr<const Model>& model,
                                        std::span<const int32_t> train,
                                        std::span<const int32_t> heldout,
                                        const InputSparsityOptions& o);

}  // namespace hearth::calib
