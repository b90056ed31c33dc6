// How many neurons of each size class go to the device (placement_knapsack.h).
//
// Why this is exact:
// - One class: every neuron costs the same, so the most frequent ones that fit are best.
// - Two classes: every count of one class is tried and the other takes what fits (its value is
//   nondecreasing in its count): O(n), no theory needed.
// - Three or more: the proximity theorem of Eisenbrand and Weismantel ("Proximity results and
//   faster algorithms for integer programming using the Steinitz lemma", SODA 2018): for
//   max c.x, Ax = b, 0 <= x <= u, x integer, with m rows and integer entries of absolute value at
//   most Delta, some integer optimum lies within L1 distance m(2m Delta + 1)^m of an optimal vertex
//   of the LP relaxation. Here the one row is the budget (with a slack variable), in units of
//   g = gcd of the neuron sizes, so Delta = max bytes / g and the distance is at most
//   2 Delta + 1 neurons. The LP vertex is the greedy by frequency per byte up to the first neuron
//   that does not fit (taken fractionally). Chosen neurons are a prefix of each class, so the
//   distance between two choices is the sum of their count differences; from the vertex's floor
//   counts it is at most D = 2 Delta + 2. Enumerating the counts of all classes but one inside that
//   L1 ball, the last class taking what fits, therefore meets an optimum.
//   The ball has about (2D)^(k-1)/(k-1)! points for k classes: tiny for real quantization mixes
//   (e.g. sizes 13824 and 15936 bytes: g = 192, Delta = 83), but not when g is tiny against the
//   sizes. Past max_steps the greedy (by frequency per byte, skipping what does not fit, which is
//   short of the LP value by less than one neuron's frequency) or the best the search had met is
//   returned with the LP value as the bound, and the caller says so.
#include "sparse/placement_knapsack.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace hearth::sparse::detail {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;

int64_t size_of(const NeuronClass& c) { return static_cast<int64_t>(c.values.size()); }

// One walk in order of frequency per byte gives both the LP vertex (the counts before the first
// neuron that does not fit, that neuron fractional) and the greedy (which skips a class once its
// next neuron does not fit: the rest of the class costs the same).
struct DensityWalk {
  std::vector<int64_t> lp_floor;
  double lp_value = 0;
  bool fractional = false;
  std::vector<int64_t> greedy;
  double greedy_value = 0;
};

DensityWalk walk_by_density(const std::vector<NeuronClass>& classes, uint64_t budget) {
  const size_t n = classes.size();
  DensityWalk w;
  w.greedy.assign(n, 0);
  std::vector<bool> closed(n, false);
  bool lp_done = false;
  uint64_t left = budget;
  for (;;) {
    int best = -1;
    for (size_t c = 0; c < n; ++c) {
      if (closed[c] || w.greedy[c] == size_of(classes[c])) continue;
      const auto& k = classes[c];
      if (best < 0) {
        best = static_cast<int>(c);
        continue;
      }
      const auto& b = classes[static_cast<size_t>(best)];
      // a/wa > b/wb without dividing; ties keep the lower class
      if (static_cast<double>(k.values[static_cast<size_t>(w.greedy[c])]) * static_cast<double>(b.bytes) >
          static_cast<double>(b.values[static_cast<size_t>(w.greedy[static_cast<size_t>(best)])]) *
              static_cast<double>(k.bytes)) {
        best = static_cast<int>(c);
      }
    }
    if (best < 0) break;
    const auto c = static_cast<size_t>(best);
    const double v = classes[c].values[static_cast<size_t>(w.greedy[c])];
    if (classes[c].bytes <= left) {
      left -= classes[c].bytes;
      w.greedy_value += v;
      if (!lp_done) w.lp_value += v;
      ++w.greedy[c];
      continue;
    }
    if (!lp_done) {
      lp_done = true;
      w.lp_floor = w.greedy;
      w.lp_value += v * static_cast<double>(left) / static_cast<double>(classes[c].bytes);
      w.fractional = true;
    }
    closed[c] = true;
  }
  if (!lp_done) w.lp_floor = w.greedy;
  return w;
}

// Depth-first over the counts of all classes but `last`, inside an L1 ball around `center`; the
// last class takes what fits.
class BallSearch {
 public:
  BallSearch(const std::vector<NeuronClass>& classes, size_t last, std::vector<int64_t> center,
             int64_t max_steps)
      : classes_(classes), last_(last), center_(std::move(center)), max_steps_(max_steps),
        count_(classes.size(), 0) {
    for (const NeuronClass& c : classes) {
      std::vector<double>& p = prefix_.emplace_back(c.values.size() + 1, 0.0);
      for (size_t i = 0; i < c.values.size(); ++i) p[i + 1] = p[i] + c.values[i];
    }
    for (size_t c = 0; c < classes.size(); ++c) {
      if (c != last) order_.push_back(c);
    }
  }

  // False when max_steps ran out first.
  bool run(uint64_t budget, int64_t ball) { return visit(0, budget, ball, 0.0); }
  const std::vector<int64_t>& best() const { return best_; }
  double best_value() const { return best_value_; }

 private:
  bool visit(size_t depth, uint64_t left, int64_t ball, double value) {
    if (++steps_ > max_steps_) return false;
    if (depth == order_.size()) {
      const NeuronClass& k = classes_[last_];
      const auto fit = static_cast<int64_t>(std::min<uint64_t>(left / k.bytes, k.values.size()));
      const double total = value + prefix_[last_][static_cast<size_t>(fit)];
      if (best_.empty() || total > best_value_) {
        count_[last_] = fit;
        best_ = count_;
        best_value_ = total;
      }
      return true;
    }
    const size_t c = order_[depth];
    const NeuronClass& k = classes_[c];
    const int64_t mid = center_[c];
    const int64_t lo = std::max<int64_t>(0, mid - ball);
    const int64_t fit = static_cast<int64_t>(std::min<uint64_t>(left / k.bytes, k.values.size()));
    const int64_t hi = std::min(fit, mid + ball);
    for (int64_t n = lo; n <= hi; ++n) {
      count_[c] = n;
      if (!visit(depth + 1, left - static_cast<uint64_t>(n) * k.bytes, ball - std::abs(n - mid),
                 value + prefix_[c][static_cast<size_t>(n)])) {
        return false;
      }
    }
    return true;
  }

  const std::vector<NeuronClass>& classes_;
  size_t last_;
  std::vector<int64_t> center_;
  int64_t max_steps_;
  std::vector<std::vector<double>> prefix_;
  std::vector<size_t> order_;
  std::vector<int64_t> count_;
  std::vector<int64_t> best_;
  double best_value_ = 0;
  int64_t steps_ = 0;
};

// D = 2 Delta + 2 in neurons (see the top of the file), or unlimited when it would not fit.
int64_t proximity_radius(const std::vector<NeuronClass>& classes) {
  uint64_t g = 0, largest = 0;
  for (const NeuronClass& c : classes) {
    g = std::gcd(g, c.bytes);
    largest = std::max(largest, c.bytes);
  }
  const uint64_t delta = largest / g;
  return delta > static_cast<uint64_t>(kUnlimited / 4) ? kUnlimited
                                                       : static_cast<int64_t>(2 * delta + 2);
}

}  // namespace

ClassCounts solve_class_counts(const std::vector<NeuronClass>& classes, uint64_t budget,
                               int64_t max_steps) {
  ClassCounts out;
  out.count.assign(classes.size(), 0);
  if (classes.empty()) return out;
  if (classes.size() == 1) {  // the usual case, without the walk's and the search's memory
    const NeuronClass& k = classes[0];
    out.count[0] = static_cast<int64_t>(std::min<uint64_t>(budget / k.bytes, k.values.size()));
    for (int64_t i = 0; i < out.count[0]; ++i) out.value += k.values[static_cast<size_t>(i)];
    out.bound = out.value;
    return out;
  }
  uint64_t g = 0;
  for (const NeuronClass& c : classes) g = std::gcd(g, c.bytes);
  budget -= budget % g;  // what no combination of sizes can use anyway; keeps the LP vertex exact

  const DensityWalk walk = walk_by_density(classes, budget);
  if (!walk.fractional) {  // everything fits: the LP vertex is integral, hence optimal
    out.count = walk.lp_floor;
    out.value = out.bound = walk.greedy_value;
    return out;
  }
  // The class with the most feasible counts is left to take what fits: the fewest to enumerate.
  size_t last = 0;
  int64_t widest = -1;
  for (size_t c = 0; c < classes.size(); ++c) {
    const auto fit = static_cast<int64_t>(
        std::min<uint64_t>(budget / classes[c].bytes, classes[c].values.size()));
    if (fit > widest) {
      widest = fit;
      last = c;
    }
  }
  // Up to two classes every count is tried (no theorem involved, O(n)); beyond, the ball.
  const bool small = classes.size() <= 2;
  BallSearch search(classes, last,
                    small ? std::vector<int64_t>(classes.size(), 0) : walk.lp_floor,
                    small ? kUnlimited : max_steps);
  if (search.run(budget, small ? kUnlimited : proximity_radius(classes))) {
    out.count = search.best();
    out.value = out.bound = search.best_value();
    return out;
  }
  // Cut short: the better of the greedy and the best the search had met.
  const bool searched = !search.best().empty() && search.best_value() > walk.greedy_value;
  out.count = searched ? search.best() : walk.greedy;
  out.value = searched ? search.best_value() : walk.greedy_value;
  out.bound = std::max(walk.lp_value, out.value);
  out.proven_optimal = false;
  return out;
}

}  // namespace hearth::sparse::detail
