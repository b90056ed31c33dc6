// The placement solver (placement.h): attention and KV first, then predictors, then neurons.
//
// Why this order: a layer's device part needs its input on the device, so attention (with its
// KV cache) of layer l is worth nothing unless the layers before it are there too; and a hot
// neuron needs its layer's predictor to be told when to fire. Predictors are placed before
// neurons (as PowerInfer's MLP_PRED level), which turns the neuron choice into a knapsack with no
// fixed costs; a predictor whose layer then gets no neuron is dropped and the neurons solved again
// with its bytes, until every placed predictor serves a hot neuron. The neuron choice is exact for
// the predictors so kept (placement_knapsack.cc says why), not over every choice of predictors
// (that is a fixed-charge knapsack): keeping a predictor whose layer's few hot neurons are worth
// less than what its bytes would buy elsewhere loses a little. Real layers, where hundreds of
// neurons fire far more often than the median and a predictor weighs about a thousand neurons,
// do not come near that.
//
// Cost: the sort of every neuron by frequency is the largest single part of a solve (hence the
// radix sort below), and a first call in a fresh process spends most of its time in page faults
// on the work arrays. Figures: docs/benchmarks.md (PlacementSolver.LargeModelSolves*).
#include "sparse/placement.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "core/error.h"
#include "sparse/placement_knapsack.h"

namespace hearth::sparse {
namespace {

// NaN, infinite and negative frequencies are bad statistics, not "always fires": they count as 0.
float clean(float f) { return std::isfinite(f) && f > 0 ? f : 0.0f; }

uint64_t add_sat(uint64_t a, uint64_t b) {
  uint64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? std::numeric_limits<uint64_t>::max() : s;
}

uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t s = 0;
  return __builtin_mul_overflow(a, b, &s) ? std::numeric_limits<uint64_t>::max() : s;
}

uint64_t left_of(const Placement& p) { return p.budget_bytes - p.bytes; }

void charge(Placement& p, size_t il, uint64_t bytes) {
  p.layers[il].bytes += bytes;
  p.bytes += bytes;
}

void validate(const PlacementRequest& r) {
  for (size_t il = 0; il < r.layers.size(); ++il) {
    const LayerCosts& l = r.layers[il];
    if (l.n_ff < 0 || l.n_ff > std::numeric_limits<int32_t>::max()) {
      fail("placement: layer ", il, " has n_ff ", l.n_ff);
    }
    if (!l.frequency.empty() && l.frequency.size() != static_cast<size_t>(l.n_ff)) {
      fail("placement: layer ", il, " has ", l.frequency.size(), " frequencies for ", l.n_ff,
           " neurons");
    }
  }
}

// How many of the layers with neurons have statistics.
struct StatsCount {
  size_t with = 0, without = 0;
  bool all() const { return with > 0 && without == 0; }
};

StatsCount count_statistics(const PlacementRequest& r) {
  StatsCount s;
  for (const LayerCosts& l : r.layers) {
    if (l.n_ff > 0) ++(l.frequency.empty() ? s.without : s.with);
  }
  return s;
}

// Layers rule: whole layers in order while they fit.
void place_whole_layers(const PlacementRequest& r, Placement& p) {
  for (size_t il = 0; il < r.layers.size(); ++il) {
    const LayerCosts& l = r.layers[il];
    const uint64_t n_ff = static_cast<uint64_t>(l.n_ff);
    const uint64_t cost = add_sat(add_sat(l.attention_bytes, l.kv_bytes),
                                  add_sat(n_ff > 0 ? l.predictor_bytes : 0, mul_sat(n_ff, l.neuron_bytes)));
    if (cost > left_of(p)) break;
    LayerPlacement& out = p.layers[il];
    out.attention = true;
    out.predictor = n_ff > 0 && l.predictor_bytes > 0;
    out.hot.resize(n_ff);
    for (uint64_t i = 0; i < n_ff; ++i) out.hot[i] = static_cast<int32_t>(i);
    charge(p, il, cost);
  }
}

void place_attention(const PlacementRequest& r, Placement& p) {
  for (size_t il = 0; il < r.layers.size(); ++il) {
    const uint64_t cost = add_sat(r.layers[il].attention_bytes, r.layers[il].kv_bytes);
    if (cost > left_of(p)) break;
    p.layers[il].attention = true;
    charge(p, il, cost);
  }
}

struct Item {
  float f;
  uint32_t layer;
  int32_t id;
};

// Stable LSD radix sort on the frequency's bits (for positive floats their order as unsigned
// integers), three passes of 11 bits: items come in layer and id order, so ties keep it. Linear
// in the number of neurons, where a comparison sort's n log n over a large model's millions of
// neurons would be most of the solve time.
void sort_most_frequent_first(std::vector<Item>& items) {
  constexpr int kBits = 11;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  std::vector<Item> other(items.size());
  std::vector<size_t> start(size_t{1} << kBits);
  for (int shift = 0; shift < 32; shift += kBits) {
    std::fill(start.begin(), start.end(), 0);
    auto digit = [&](const Item& it) { return (~std::bit_cast<uint32_t>(it.f) >> shift) & kMask; };
    for (const Item& it : items) ++start[digit(it)];
    size_t at = 0;
    for (size_t& s : start) at += std::exchange(s, at);
    for (const Item& it : items) other[start[digit(it)]++] = it;
    items.swap(other);
  }
}

// One solve of the neurons for a set of predictors.
struct Round {
  std::vector<bool> in;                   // predictor placed (or none needed)
  std::vector<std::vector<int32_t>> hot;  // per layer, in frequency order
  detail::ClassCounts counts;
};

// `items` are the neurons with frequency > 0 of the layers whose attention is placed, most
// frequent first (ties: lower layer, lower id). `positive` counts them per layer.
Round solve_round(const PlacementRequest& r, const Placement& p, const std::vector<Item>& items,
                  const std::vector<int64_t>& positive, const std::vector<bool>& dropped) {
  const size_t n = r.layers.size();
  Round out;
  out.in.assign(n, false);
  out.hot.resize(n);
  uint64_t left = left_of(p);
  std::vector<uint64_t> sizes;
  for (size_t il = 0; il < n; ++il) {
    if (positive[il] == 0 || dropped[il] || r.layers[il].predictor_bytes > left) continue;
    left -= r.layers[il].predictor_bytes;
    out.in[il] = true;
    if (r.layers[il].neuron_bytes > 0) sizes.push_back(r.layers[il].neuron_bytes);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<detail::NeuronClass> classes(sizes.size());
  std::vector<std::vector<uint32_t>> members(sizes.size());
  auto class_of = [&](uint64_t bytes) {
    return static_cast<size_t>(std::lower_bound(sizes.begin(), sizes.end(), bytes) - sizes.begin());
  };
  std::vector<size_t> class_size(sizes.size(), 0);  // exact reserves: 2.3M neurons, no regrowth
  for (size_t il = 0; il < n; ++il) {
    if (out.in[il] && r.layers[il].neuron_bytes > 0) {
      class_size[class_of(r.layers[il].neuron_bytes)] += static_cast<size_t>(positive[il]);
    }
  }
  for (size_t c = 0; c < sizes.size(); ++c) {
    classes[c].bytes = sizes[c];
    classes[c].values.reserve(class_size[c]);
    members[c].reserve(class_size[c]);
  }
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    if (!out.in[it.layer]) continue;
    const uint64_t b = r.layers[it.layer].neuron_bytes;
    if (b == 0) {  // costs nothing: always worth it
      out.hot[it.layer].push_back(it.id);
      continue;
    }
    const size_t c = class_of(b);
    classes[c].values.push_back(it.f);
    members[c].push_back(static_cast<uint32_t>(k));
  }
  out.counts = detail::solve_class_counts(classes, left);
  for (size_t c = 0; c < classes.size(); ++c) {
    for (int64_t j = 0; j < out.counts.count[c]; ++j) {
      const Item& it = items[members[c][static_cast<size_t>(j)]];
      out.hot[it.layer].push_back(it.id);
    }
  }
  return out;
}

// Distinct ids below n_ff into ascending order, in O(n_ff).
void ascending(std::vector<int32_t>& ids, int64_t n_ff) {
  std::vector<bool> mark(static_cast<size_t>(n_ff), false);
  for (const int32_t id : ids) mark[static_cast<size_t>(id)] = true;
  ids.clear();
  for (size_t i = 0; i < mark.size(); ++i) {
    if (mark[i]) ids.push_back(static_cast<int32_t>(i));
  }
}

// Neurons rule after attention. Returns the knapsack's answer (for the note).
detail::ClassCounts place_neurons(const PlacementRequest& r, Placement& p) {
  const size_t n = r.layers.size();
  std::vector<Item> items;
  std::vector<int64_t> positive(n, 0);
  size_t eligible = 0;
  for (size_t il = 0; il < n; ++il) eligible += p.layers[il].attention ? r.layers[il].frequency.size() : 0;
  items.reserve(eligible);
  for (size_t il = 0; il < n; ++il) {
    if (!p.layers[il].attention) continue;
    const std::vector<float>& freq = r.layers[il].frequency;
    for (size_t i = 0; i < freq.size(); ++i) {
      const float f = clean(freq[i]);
      if (f == 0) continue;
      items.push_back(Item{f, static_cast<uint32_t>(il), static_cast<int32_t>(i)});
      ++positive[il];
    }
  }
  sort_most_frequent_first(items);
  // Each round drops at least one predictor, so this ends within n rounds (one, almost always).
  std::vector<bool> dropped(n, false);
  for (;;) {
    Round round = solve_round(r, p, items, positive, dropped);
    bool again = false;
    for (size_t il = 0; il < n; ++il) {
      if (round.in[il] && round.hot[il].empty() && r.layers[il].predictor_bytes > 0) {
        dropped[il] = again = true;
      }
    }
    if (again) continue;
    for (size_t il = 0; il < n; ++il) {
      std::vector<int32_t>& hot = round.hot[il];
      if (hot.empty()) continue;
      ascending(hot, r.layers[il].n_ff);
      const LayerCosts& l = r.layers[il];
      charge(p, il, l.predictor_bytes + hot.size() * l.neuron_bytes);
      p.layers[il].predictor = l.predictor_bytes > 0;
      p.layers[il].hot = std::move(hot);
    }
    return round.counts;
  }
}

// What is left goes to never-fired neurons of layers that already hold hot ones: a layer whole on
// the device leaves the host nothing to compute, and it costs no predictor.
void fill_never_fired(const PlacementRequest& r, Placement& p) {
  for (size_t il = 0; il < r.layers.size(); ++il) {
    LayerPlacement& out = p.layers[il];
    const LayerCosts& l = r.layers[il];
    if (out.hot.empty()) continue;
    const uint64_t room = l.neuron_bytes == 0 ? std::numeric_limits<uint64_t>::max()
                                              : left_of(p) / l.neuron_bytes;
    const size_t before = out.hot.size();
    for (size_t i = 0; i < l.frequency.size() && out.hot.size() - before < room; ++i) {
      if (clean(l.frequency[i]) == 0) out.hot.push_back(static_cast<int32_t>(i));
    }
    std::inplace_merge(out.hot.begin(), out.hot.begin() + static_cast<ptrdiff_t>(before), out.hot.end());
    charge(p, il, (out.hot.size() - before) * l.neuron_bytes);
  }
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * share);
  return buf;
}

// "7.81 of 8.00 GiB", in the unit that suits the budget.
std::string bytes_of_budget(uint64_t bytes, uint64_t budget) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double scale = 1;
  while (u < 4 && static_cast<double>(budget) >= scale * 1024) {
    scale *= 1024;
    ++u;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f of %.0f %s" : "%.2f of %.2f %s",
                static_cast<double>(bytes) / scale, static_cast<double>(budget) / scale, kUnits[u]);
  return buf;
}

// hot_share and the parts of the note every rule shares.
struct Shares {
  double activations = 0, neurons = 0, total_activations = 0;
};

Shares measure(const PlacementRequest& r, const Placement& p) {
  double placed_f = 0, total_f = 0;
  uint64_t placed_n = 0, total_n = 0;
  for (size_t il = 0; il < r.layers.size(); ++il) {
    const LayerCosts& l = r.layers[il];
    total_n += static_cast<uint64_t>(l.n_ff);
    placed_n += p.layers[il].hot.size();
    for (const float f : l.frequency) total_f += clean(f);
    for (const int32_t id : p.layers[il].hot) {
      if (!l.frequency.empty()) placed_f += clean(l.frequency[static_cast<size_t>(id)]);
    }
  }
  Shares s;
  s.total_activations = total_f;
  s.activations = total_f > 0 ? std::min(1.0, placed_f / total_f) : 0;  // rounding: never above 1
  s.neurons = total_n > 0 ? static_cast<double>(placed_n) / static_cast<double>(total_n) : 0;
  return s;
}

size_t count_layers(const Placement& p, bool LayerPlacement::*flag) {
  size_t n = 0;
  for (const LayerPlacement& l : p.layers) n += l.*flag ? 1 : 0;
  return n;
}

}  // namespace

Placement solve_placement(const PlacementRequest& request) {
  validate(request);
  Placement p;
  p.budget_bytes = request.budget_bytes;
  p.layers.resize(request.layers.size());
  for (size_t il = 0; il < request.layers.size(); ++il) p.layers[il].n_ff = request.layers[il].n_ff;
  const std::string n_layers = std::to_string(request.layers.size());
  if (request.budget_bytes == 0) {
    p.note = "device budget is 0: nothing placed on the device";
    return p;
  }

  const StatsCount stats = count_statistics(request);
  const bool neurons = request.strategy == PlacementStrategy::Neurons && stats.all();
  if (!neurons) {
    place_whole_layers(request, p);
    const Shares s = measure(request, p);
    p.hot_share = stats.all() ? s.activations : s.neurons;
    std::string rule = "whole layers: ";
    if (request.strategy == PlacementStrategy::Neurons) {
      rule = stats.with == 0 ? "no activation statistics (calibrate the model to get them): "
                               "whole layers first: "
                             : str_cat("activation statistics missing for ", stats.without, " of ",
                                       stats.with + stats.without,
                                       " layers (calibrate the model to get them): whole layers first: ");
    }
    p.note = str_cat(rule, count_layers(p, &LayerPlacement::attention), "/", n_layers,
                     " layers on the device (", percent(p.hot_share),
                     stats.all() ? " of activations), " : " of FFN neurons), ",
                     bytes_of_budget(p.bytes, p.budget_bytes));
    return p;
  }

  place_attention(request, p);
  const detail::ClassCounts counts = place_neurons(request, p);
  fill_never_fired(request, p);
  assert(p.bytes <= p.budget_bytes);
  const Shares s = measure(request, p);
  p.hot_share = s.activations;
  p.from_statistics = true;
  p.note = str_cat("neurons by activation frequency: attention of ",
                   count_layers(p, &LayerPlacement::attention), "/", n_layers, " layers, ",
                   percent(s.neurons), " of FFN neurons (", percent(s.activations),
                   " of activations) on the device, ", bytes_of_budget(p.bytes, p.budget_bytes));
  if (!counts.proven_optimal && s.total_activations > 0) {
    char gap[64];
    std::snprintf(gap, sizeof gap, "%.2g%%",
                  100.0 * (counts.bound - counts.value) / s.total_activations);
    p.note += str_cat("; not proven optimal: at most ", gap, " of activations below the best");
  }
  return p;
}

}  // namespace hearth::sparse
