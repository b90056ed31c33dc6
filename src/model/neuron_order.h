// Each FFN layer's neurons held most-active first (docs/design-notes.md, "Neuron order").
//
// An FFN's neurons can be listed in any order: permuting the rows of gate, up, down_t and fc2
// (and the up bias) together, and reading ffn_down's columns through the same permutation,
// computes the same function. Activation frequencies follow a power law, so after sorting by the
// frequencies calibration measured (blk.N.ffn_act_freq) the neurons a decode step needs sit mostly
// in long runs of consecutive rows at the front of each matrix, which the hardware prefetchers
// stream at nearly the dense rate, instead of being scattered over the whole matrix (measured in
// docs/benchmarks.md). Layers without frequencies keep the file's order.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_impl.h"

namespace hearth {

// The activation frequencies of layer il that calibration stored (blk.N.ffn_act_freq), in the
// order m holds the neurons in; empty when the file has none (or not as F32 [n_ff]).
std::vector<float> layer_frequency(const Model::Impl& m, size_t il);

// Positions by falling frequency: order[j] is the neuron (file id) that goes to position j; ties
// keep file order. Empty when that is the identity (already sorted, or no frequencies).
std::vector<int32_t> frequency_order(const std::vector<float>& freq);

// Reorders every layer that has frequencies and records the orders in m.neuron_order. A mapped
// file's matrices are copied into m.reordered (the mapping is never written); a file read into
// memory (--no-mmap) is permuted in place, so no second copy is held.
void reorder_neurons(Model::Impl& m);

}  // namespace hearth
