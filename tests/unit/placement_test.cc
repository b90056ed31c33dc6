// The placement solver: optimal against brute force and a knapsack DP, never over budget,
// deterministic, and each rule of placement.h (attention first, predictors only with neurons,
// whole layers, the fallback, budget 0) on hand-made cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "sparse/placement.h"
#include "sparse/placement_knapsack.h"
#include "unit/placement_test_util.h"

namespace hearth::sparse {
namespace {

using placement_test::counted;
using placement_test::hot_frequency;
using placement_test::make_layer;

// Everything placement.h promises about any answer.
void expect_invariants(const PlacementRequest& r, const Placement& p) {
  ASSERT_EQ(p.layers.size(), r.layers.size());
  EXPECT_LE(p.bytes, p.budget_bytes);
  EXPECT_EQ(p.budget_bytes, r.budget_bytes);
  EXPECT_GE(p.hot_share, 0.0);
  EXPECT_LE(p.hot_share, 1.0);
  EXPECT_EQ(p.note.find('\n'), std::string::npos);
  uint64_t sum = 0;
  for (size_t il = 0; il < r.layers.size(); ++il) {
    const LayerCosts& c = r.layers[il];
    const LayerPlacement& l = p.layers[il];
    SCOPED_TRACE(il);
    EXPECT_EQ(l.n_ff, c.n_ff);
    if (il > 0 && l.attention) {
      EXPECT_TRUE(p.layers[il - 1].attention) << "attention is a prefix";
    }
    for (size_t j = 0; j < l.hot.size(); ++j) {
      EXPECT_GE(l.hot[j], 0);
      EXPECT_LT(l.hot[j], c.n_ff);
      if (j > 0) {
        EXPECT_LT(l.hot[j - 1], l.hot[j]);
      }
    }
    EXPECT_TRUE(l.hot.empty() || l.attention);
    EXPECT_EQ(l.predictor, !l.hot.empty() && c.predictor_bytes > 0);
    const uint64_t expected = (l.attention ? c.attention_bytes + c.kv_bytes : 0) +
                              (l.predictor ? c.predictor_bytes : 0) + l.hot.size() * c.neuron_bytes;
    EXPECT_EQ(l.bytes, expected);
    sum += l.bytes;
  }
  EXPECT_EQ(sum, p.bytes);
}

// The best summed frequency over every subset of the neurons the solver may choose among: those
// of layers whose attention it placed and whose predictor it kept (or that need none), in what
// the budget leaves after attention and those predictors.
double brute_force_best(const PlacementRequest& r, const Placement& p) {
  uint64_t left = r.budget_bytes;
  std::vector<double> value;
  std::vector<uint64_t> bytes;
  for (size_t il = 0; il < r.layers.size(); ++il) {
    const LayerCosts& c = r.layers[il];
    if (!p.layers[il].attention) continue;
    left -= c.attention_bytes + c.kv_bytes;
    if (c.predictor_bytes > 0 && !p.layers[il].predictor) continue;
    left -= p.layers[il].predictor ? c.predictor_bytes : 0;
    for (const float f : c.frequency) {
      value.push_back(counted(f));
      bytes.push_back(c.neuron_bytes);
    }
  }
  const size_t m = value.size();
  std::vector<double> v(size_t{1} << m, 0.0);
  std::vector<uint64_t> b(size_t{1} << m, 0);
  double best = 0;
  for (size_t mask = 1; mask < v.size(); ++mask) {
    const size_t low = static_cast<size_t>(__builtin_ctzll(mask));
    v[mask] = v[mask & (mask - 1)] + value[low];
    b[mask] = b[mask & (mask - 1)] + bytes[low];
    if (b[mask] <= left) best = std::max(best, v[mask]);
  }
  return best;
}

float random_frequency(std::mt19937& rng) {
  // Few distinct values, so that ties are common; now and then a bad value (counts as 0).
  static constexpr float kValues[] = {0.0f, 0.05f, 0.1f, 0.25f, 0.5f, 0.7f, 1.0f};
  const int pick = std::uniform_int_distribution<int>(0, 19)(rng);
  if (pick == 0) return std::numeric_limits<float>::quiet_NaN();
  if (pick == 1) return -0.5f;
  if (pick < 9) return kValues[static_cast<size_t>(pick - 2)];
  return std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
}

TEST(PlacementSolver, MatchesBruteForceOnSmallCases) {
  std::mt19937 rng(12345);
  auto num = [&](int lo, int hi) { return static_cast<uint64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (int trial = 0; trial < 3000; ++trial) {
    PlacementRequest r;
    const int n_layer = static_cast<int>(num(1, 3));
    uint64_t total = 0;
    for (int il = 0; il < n_layer; ++il) {
      std::vector<float> f(num(0, 6));
      for (float& x : f) x = random_frequency(rng);
      // predictors in a third of the cases; neuron sizes differ between layers
      r.layers.push_back(make_layer(num(0, 8), num(0, 4), trial % 3 == 0 ? num(0, 12) : 0, num(1, 9), f));
      total += 60;
    }
    r.budget_bytes = num(0, static_cast<int>(total));
    SCOPED_TRACE(trial);
    const Placement p = solve_placement(r);
    expect_invariants(r, p);
    EXPECT_NEAR(hot_frequency(r, p), brute_force_best(r, p), 1e-9);
  }
}

// 0/1 knapsack DP over all neurons (every layer's attention is free here): the reference for the
// proximity search, which the brute force above is too small to reach.
TEST(PlacementSolver, MatchesKnapsackDpWithManyNeuronsOfThreeAndFourSizes) {
  std::mt19937 rng(777);
  for (int trial = 0; trial < 60; ++trial) {
    PlacementRequest r;
    const int n_layer = 3 + trial % 2;
    uint64_t all_bytes = 0;
    for (int il = 0; il < n_layer; ++il) {
      std::vector<float> f(std::uniform_int_distribution<size_t>(40, 150)(rng));
      for (float& x : f) x = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 0.25f : random_frequency(rng);
      const uint64_t size = std::uniform_int_distribution<uint64_t>(2, 13)(rng);
      all_bytes += size * f.size();
      r.layers.push_back(make_layer(0, 0, 0, size, f));
    }
    r.budget_bytes = std::uniform_int_distribution<uint64_t>(1, all_bytes / 2)(rng);
    std::vector<double> dp(r.budget_bytes + 1, 0.0);
    for (const LayerCosts& l : r.layers) {
      for (const float f : l.frequency) {
        for (uint64_t b = r.budget_bytes; b >= l.neuron_bytes; --b) {
          dp[b] = std::max(dp[b], dp[b - l.neuron_bytes] + counted(f));
        }
      }
    }
    SCOPED_TRACE(trial);
    const Placement p = solve_placement(r);
    expect_invariants(r, p);
    EXPECT_NEAR(hot_frequency(r, p), dp[r.budget_bytes], 1e-9);
    EXPECT_EQ(p.note.find("not proven"), std::string::npos);
  }
}

TEST(PlacementSolver, RandomRequestsNeverExceedTheBudget) {
  std::mt19937 rng(99);
  auto num = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 4000; ++trial) {
    PlacementRequest r;
    r.strategy = trial % 4 == 0 ? PlacementStrategy::Layers : PlacementStrategy::Neurons;
    const int stats = trial % 5;  // 0: none, 1: some layers, else all
    const uint64_t n_layer = num(0, 6);
    for (uint64_t il = 0; il < n_layer; ++il) {
      std::vector<float> f(num(0, 40));
      for (float& x : f) x = random_frequency(rng);
      if (stats == 0 || (stats == 1 && il % 2 == 1)) f.clear();
      LayerCosts l = make_layer(num(0, 300), num(0, 100), num(0, 3) == 0 ? 0 : num(1, 200), num(0, 30), f);
      l.n_ff = static_cast<int64_t>(f.empty() ? num(0, 40) : f.size());
      r.layers.push_back(l);
    }
    r.budget_bytes = num(0, 3) == 0 ? num(0, 200) : num(0, 4000);
    SCOPED_TRACE(trial);
    expect_invariants(r, solve_placement(r));
  }
}

TEST(PlacementSolver, SameRequestSameAnswer) {
  std::mt19937 rng(5);
  PlacementRequest r;
  r.budget_bytes = 40'000;
  for (int il = 0; il < 6; ++il) {
    std::vector<float> f(500, 0.5f);  // all tied: only the tie rule decides
    for (size_t i = 0; i < f.size(); i += 3) f[i] = random_frequency(rng);
    r.layers.push_back(make_layer(1000, 100, 200, 10 + static_cast<uint64_t>(il % 3) * 7, f));
  }
  const Placement a = solve_placement(r);
  const PlacementRequest copy = r;
  placement_test::expect_same_placement(a, solve_placement(copy));
  placement_test::expect_same_placement(a, solve_placement(r));
}

TEST(PlacementSolver, TiesGoToTheLowerLayerThenTheLowerId) {
  PlacementRequest r;
  r.budget_bytes = 3;
  r.layers.push_back(make_layer(0, 0, 0, 1, {0.5f, 0.9f, 0.5f}));
  r.layers.push_back(make_layer(0, 0, 0, 1, {0.5f, 0.5f}));
  const Placement p = solve_placement(r);
  EXPECT_EQ(p.layers[0].hot, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(p.layers[1].hot.empty());
}

TEST(PlacementSolver, AttentionFirstStopsAtTheFirstLayerThatDoesNotFit) {
  PlacementRequest r;
  r.budget_bytes = 30;
  r.layers.push_back(make_layer(8, 2, 0, 1, {0.9f, 0.1f}));
  r.layers.push_back(make_layer(40, 10, 0, 1, {1.0f, 1.0f}));
  r.layers.push_back(make_layer(8, 2, 0, 1, {1.0f, 1.0f}));  // would fit, but after a misfit
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_TRUE(p.layers[0].attention);
  EXPECT_FALSE(p.layers[1].attention);
  EXPECT_FALSE(p.layers[2].attention);
  EXPECT_EQ(p.layers[0].hot, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(p.layers[2].hot.empty());
  EXPECT_EQ(p.bytes, 12u);
  EXPECT_NE(p.note.find("attention of 1/3 layers"), std::string::npos) << p.note;
}

TEST(PlacementSolver, AttentionComesBeforeAnyNeuron) {
  PlacementRequest r;
  r.budget_bytes = 100;
  r.layers.push_back(make_layer(50, 0, 0, 10, {1.0f, 1.0f, 1.0f, 1.0f, 1.0f}));
  r.layers.push_back(make_layer(50, 0, 0, 10, {0.01f}));
  const Placement p = solve_placement(r);
  EXPECT_TRUE(p.layers[1].attention);
  EXPECT_TRUE(p.layers[0].hot.empty());
  EXPECT_EQ(p.bytes, 100u);
}

TEST(PlacementSolver, APredictorIsChargedOnlyWithNeurons) {
  // Layer 0's predictor fits first, but its one rare neuron loses to layer 1's: the predictor is
  // then dropped and its bytes go to layer 1's neurons.
  PlacementRequest r;
  r.budget_bytes = 100;
  r.layers.push_back(make_layer(0, 0, 50, 10, {0.01f}));
  r.layers.push_back(make_layer(0, 0, 0, 10, std::vector<float>(10, 0.9f)));
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_FALSE(p.layers[0].predictor);
  EXPECT_TRUE(p.layers[0].hot.empty());
  EXPECT_EQ(p.layers[0].bytes, 0u);
  EXPECT_EQ(p.layers[1].hot.size(), 10u);
  EXPECT_EQ(p.bytes, 100u);
}

TEST(PlacementSolver, APredictorThatDoesNotFitOnlyCostsItsLayerTheNeurons) {
  PlacementRequest r;
  r.budget_bytes = 50;
  r.layers.push_back(make_layer(0, 0, 100, 1, {0.9f}));
  r.layers.push_back(make_layer(0, 0, 10, 1, {0.5f}));
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_FALSE(p.layers[0].predictor);
  EXPECT_TRUE(p.layers[0].hot.empty());
  EXPECT_TRUE(p.layers[1].predictor);
  EXPECT_EQ(p.layers[1].hot, (std::vector<int32_t>{0}));
  EXPECT_EQ(p.bytes, 11u);
}

TEST(PlacementSolver, SpareBytesGoToNeverFiredNeuronsOfLayersWithHotOnes) {
  PlacementRequest r;
  r.budget_bytes = 1000;
  r.layers.push_back(make_layer(0, 0, 5, 1, {0.0f, 0.5f, std::numeric_limits<float>::quiet_NaN()}));
  r.layers.push_back(make_layer(0, 0, 5, 1, {0.0f, 0.0f}));  // nothing fired: no predictor
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_EQ(p.layers[0].hot, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(p.layers[1].hot.empty());
  EXPECT_FALSE(p.layers[1].predictor);
  EXPECT_DOUBLE_EQ(p.hot_share, 1.0);
  EXPECT_NE(p.note.find("60.0% of FFN neurons (100.0% of activations)"), std::string::npos) << p.note;
}

TEST(PlacementSolver, BadFrequenciesCountAsNeverFired) {
  PlacementRequest r;
  r.budget_bytes = 1;
  const float inf = std::numeric_limits<float>::infinity();
  r.layers.push_back(make_layer(0, 0, 0, 1, {std::nanf(""), inf, -1.0f, 0.25f}));
  const Placement p = solve_placement(r);
  EXPECT_EQ(p.layers[0].hot, (std::vector<int32_t>{3}));
  EXPECT_DOUBLE_EQ(p.hot_share, 1.0);
}

TEST(PlacementSolver, LayersStrategyPlacesWholeLayersInOrder) {
  PlacementRequest r;
  r.strategy = PlacementStrategy::Layers;
  r.budget_bytes = 100;
  r.layers.push_back(make_layer(20, 5, 5, 5, {0.9f, 0.1f}));        // 40
  r.layers.push_back(make_layer(20, 5, 5, 5, {0.5f, 0.5f}));        // 40
  r.layers.push_back(make_layer(20, 5, 5, 5, {0.5f, 0.5f}));        // 40: does not fit
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_FALSE(p.from_statistics);
  EXPECT_EQ(p.layers[1].hot, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(p.layers[1].predictor);
  EXPECT_FALSE(p.layers[2].attention);
  EXPECT_EQ(p.bytes, 80u);
  EXPECT_NEAR(p.hot_share, 2.0 / 3.0, 1e-6);  // statistics exist: a share of activations
  EXPECT_EQ(p.note.rfind("whole layers: 2/3 layers on the device (66.7% of activations), 80 of 100 bytes", 0), 0u) << p.note;

  r.layers[1].attention_bytes = 90;  // stops at the first misfit, even though layer 2 would fit
  const Placement q = solve_placement(r);
  EXPECT_TRUE(q.layers[0].attention);
  EXPECT_FALSE(q.layers[2].attention);
}

TEST(PlacementSolver, NoStatisticsFallsBackToWholeLayersAndSaysSo) {
  PlacementRequest r;
  r.budget_bytes = 50;
  r.layers.push_back(make_layer(20, 5, 0, 5, {}));
  r.layers.push_back(make_layer(20, 5, 0, 5, {}));
  r.layers[0].n_ff = r.layers[1].n_ff = 2;
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_FALSE(p.from_statistics);
  EXPECT_EQ(p.layers[0].hot, (std::vector<int32_t>{0, 1}));
  EXPECT_FALSE(p.layers[1].attention);
  EXPECT_DOUBLE_EQ(p.hot_share, 0.5);  // a share of neurons
  EXPECT_EQ(p.note.rfind("no activation statistics (calibrate the model to get them): whole layers first", 0), 0u)
      << p.note;

  r.layers[0].frequency = {0.5f, 0.5f};  // statistics for one layer of two: still whole layers
  const Placement q = solve_placement(r);
  EXPECT_FALSE(q.from_statistics);
  EXPECT_NE(q.note.find("activation statistics missing for 1 of 2 layers"), std::string::npos) << q.note;
}

TEST(PlacementSolver, ZeroBudgetPlacesNothing) {
  PlacementRequest r;
  r.layers.push_back(make_layer(0, 0, 0, 0, {1.0f}));  // even free parts stay on the host
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_FALSE(p.layers[0].attention);
  EXPECT_EQ(p.bytes, 0u);
  EXPECT_NE(p.note.find("nothing placed"), std::string::npos) << p.note;
}

TEST(PlacementSolver, LayersWithoutNeuronsAndEmptyRequests) {
  PlacementRequest r;
  r.budget_bytes = 100;
  EXPECT_TRUE(solve_placement(r).layers.empty());
  r.layers.push_back(make_layer(10, 0, 5, 4, {}));  // n_ff = 0: no statistics needed
  r.layers.push_back(make_layer(10, 0, 5, 4, {0.5f, 0.25f}));
  const Placement p = solve_placement(r);
  expect_invariants(r, p);
  EXPECT_TRUE(p.from_statistics);
  EXPECT_TRUE(p.layers[0].attention);
  EXPECT_FALSE(p.layers[0].predictor);
  EXPECT_EQ(p.layers[1].hot, (std::vector<int32_t>{0, 1}));
}

TEST(PlacementSolver, MalformedRequestsThrow) {
  PlacementRequest r;
  r.budget_bytes = 10;
  r.layers.push_back(make_layer(0, 0, 0, 1, {0.5f}));
  r.layers[0].n_ff = 2;
  EXPECT_THROW(solve_placement(r), Error);
  r.layers[0].n_ff = -1;
  r.layers[0].frequency.clear();
  EXPECT_THROW(solve_placement(r), Error);
}

TEST(PlacementSolver, NoteIsOneReadableLine) {
  PlacementRequest r;
  r.budget_bytes = uint64_t{9} << 29;  // 3 GiB of attention and KV, 1 GiB of fired neurons, 0.5 spare
  for (int il = 0; il < 2; ++il) {
    r.layers.push_back(make_layer(uint64_t{1} << 30, uint64_t{1} << 29, 0, uint64_t{1} << 28, {0.75f, 0.25f, 0.0f, 0.0f}));
  }
  const Placement p = solve_placement(r);
  EXPECT_EQ(p.note,
            "neurons by activation frequency: attention of 2/2 layers, 75.0% of FFN neurons "
            "(100.0% of activations) on the device, 4.50 of 4.50 GiB");
}

// The greedy path (three sizes, enumeration cut short) stays within its bound.
TEST(PlacementKnapsack, GreedyAnswerWhenTheSearchIsCutShortIsBoundedAndSaysSo) {
  std::vector<detail::NeuronClass> classes(3);
  classes[0] = {7, {0.9f, 0.8f, 0.3f}};
  classes[1] = {5, {0.6f, 0.5f, 0.1f}};
  classes[2] = {3, {0.35f, 0.3f, 0.2f}};
  const detail::ClassCounts exact = detail::solve_class_counts(classes, 17);
  EXPECT_TRUE(exact.proven_optimal);
  EXPECT_NEAR(exact.value, 0.9 + 0.8 + 0.35, 1e-6);  // 7 + 7 + 3
  const detail::ClassCounts greedy = detail::solve_class_counts(classes, 17, 0);
  EXPECT_FALSE(greedy.proven_optimal);
  EXPECT_LE(greedy.value, exact.value + 1e-9);
  EXPECT_GE(greedy.bound, exact.value - 1e-9);
  EXPECT_GE(greedy.value, greedy.bound - 0.9 - 1e-9);  // short of the LP by less than one neuron
  uint64_t used = 0;
  for (size_t c = 0; c < classes.size(); ++c) used += static_cast<uint64_t>(greedy.count[c]) * classes[c].bytes;
  EXPECT_LE(used, 17u);
}

// Real sizes: 80 layers of 28672 neurons (a Llama-2-70B shape) with one, two and three neuron
// sizes. No timing assertion; gtest prints the time (figures in placement.cc).
void solve_large(std::vector<uint64_t> sizes) {
  std::mt19937 rng(2024);
  PlacementRequest r;
  r.budget_bytes = uint64_t{24} << 30;
  for (int il = 0; il < 80; ++il) {
    r.layers.push_back(make_layer(85'000'000, 16'000'000, 16'000'000, sizes[static_cast<size_t>(il) % sizes.size()],
                                  placement_test::power_law(rng, 28672)));
  }
  const Placement p = solve_placement(r);
  EXPECT_LE(p.bytes, p.budget_bytes);
  EXPECT_TRUE(p.layers[79].attention);
  EXPECT_GT(p.hot_share, 0.5);
  EXPECT_LT(p.budget_bytes - p.bytes, 16'000'000u + sizes[0]) << "the budget is used";
  EXPECT_EQ(p.note.find("not proven"), std::string::npos) << p.note;
}

TEST(PlacementSolver, LargeModelSolvesOneNeuronSize) { solve_large({15872}); }
TEST(PlacementSolver, LargeModelSolvesTwoNeuronSizes) { solve_large({15872, 17984}); }
TEST(PlacementSolver, LargeModelSolvesThreeNeuronSizes) { solve_large({13824, 15936, 17280}); }

}  // namespace
}  // namespace hearth::sparse
