// The neuron part of the placement solver (placement.cc): how many neurons of each size class go
// to the device. Internal to src/sparse/; the tests call it directly to reach its greedy path.
//
// Neurons of the layers that share one neuron_bytes form a class. Within a class every neuron
// costs the same, so for any count the best choice is the class's most frequent neurons: the
// problem is to pick one count per class, with value prefix[count] (concave, nondecreasing), under
// the budget.
#pragma once

#include <cstdint>
#include <vector>

namespace hearth::sparse::detail {

struct NeuronClass {
  uint64_t bytes = 0;         // one neuron; > 0
  std::vector<float> values;  // the class's frequencies, descending, each > 0
};

struct ClassCounts {
  std::vector<int64_t> count;   // per class, 0..values.size()
  double value = 0;             // summed frequency of the chosen neurons
  double bound = 0;             // an upper bound on the best value (== value when proven)
  bool proven_optimal = true;
};

// Enumeration steps after which three or more classes settle for the greedy answer: enough for
// an exact answer on real models, few enough that a pathological case stays a short wait next to
// loading the model. Only byte ratios far from what real models have (a gcd of the neuron sizes
// tiny against the sizes) come near it.
inline constexpr int64_t kMaxEnumerationSteps = 20'000'000;

// Exact for one and two classes; for three or more exact unless the enumeration would pass
// max_steps, in which case the greedy answer is returned with proven_optimal = false and the LP
// bound. Deterministic: among equal values the first in enumeration order wins.
ClassCounts solve_class_counts(const std::vector<NeuronClass>& classes, uint64_t budget,
                               int64_t max_steps = kMaxEnumerationSteps);

}  // namespace hearth::sparse::detail
