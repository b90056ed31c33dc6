// Helpers shared by the placement solver and placement cache tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sparse/placement.h"

namespace hearth::sparse::placement_test {

inline LayerCosts make_layer(uint64_t attention, uint64_t kv, uint64_t predictor, uint64_t neuron,
                             std::vector<float> frequency) {
  LayerCosts l;
  l.attention_bytes = attention;
  l.kv_bytes = kv;
  l.predictor_bytes = predictor;
  l.neuron_bytes = neuron;
  l.n_ff = static_cast<int64_t>(frequency.size());
  l.frequency = std::move(frequency);
  return l;
}

// What the solver counts a frequency as (placement.h: NaN, infinite, negative are 0).
inline double counted(float f) { return std::isfinite(f) && f > 0 ? f : 0.0; }

// Summed (counted) frequency of the hot neurons.
inline double hot_frequency(const PlacementRequest& r, const Placement& p) {
  double sum = 0;
  for (size_t il = 0; il < r.layers.size(); ++il) {
    if (r.layers[il].frequency.empty()) continue;
    for (const int32_t id : p.layers[il].hot) sum += counted(r.layers[il].frequency[static_cast<size_t>(id)]);
  }
  return sum;
}

inline void expect_same_placement(const Placement& a, const Placement& b) {
  EXPECT_EQ(a.budget_bytes, b.budget_bytes);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.hot_share, b.hot_share);
  EXPECT_EQ(a.from_statistics, b.from_statistics);
  EXPECT_EQ(a.note, b.note);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t il = 0; il < a.layers.size(); ++il) {
    SCOPED_TRACE(il);
    EXPECT_EQ(a.layers[il].attention, b.layers[il].attention);
    EXPECT_EQ(a.layers[il].predictor, b.layers[il].predictor);
    EXPECT_EQ(a.layers[il].hot, b.layers[il].hot);
    EXPECT_EQ(a.layers[il].bytes, b.layers[il].bytes);
    EXPECT_EQ(a.layers[il].n_ff, b.layers[il].n_ff);
  }
}

// Power-law frequencies (a few neurons fire for almost every token, most rarely), shuffled so
// that hot ids are spread like a real layer's.
template <typename Rng>
std::vector<float> power_law(Rng& rng, int64_t n_ff) {
  std::vector<float> f(static_cast<size_t>(n_ff));
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(1.0 / std::pow(1.0 + static_cast<double>(i), 0.7));
  std::shuffle(f.begin(), f.end(), rng);
  return f;
}

}  // namespace hearth::sparse::placement_test
