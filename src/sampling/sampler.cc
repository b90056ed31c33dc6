#include "sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace hearth {
namespace {

// Below this many candidates the nucleus search just sorts them.
constexpr int32_t kSortBelow = 64;
// Above k = n_vocab / this, nth_element beats the streaming heap for top-k.
constexpr int32_t kHeapMaxFraction = 16;

// A strict total order (higher logit first, then lower id) makes every selection and sort give
// the same result with any standard library, which the seeded draws depend on.
struct BetterLogit {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// Lomuto partition of ids[lo, hi) around the median of three: returns p with ids[lo, p) better
// than ids[p] and ids(p, hi) worse, and the summed weight of the better side. Written out rather
// than std::partition so the resulting order, and with it the draw, is the same everywhere.
int32_t partition(int32_t* ids, int32_t lo, int32_t hi, const BetterLogit& better,
                  const float* weight_of, double& better_mass) {
  const auto median_of_three = [&](int32_t x, int32_t y, int32_t z) {
    if (better(ids[x], ids[y])) {
      if (better(ids[y], ids[z])) return y;
      return better(ids[x], ids[z]) ? z : x;
    }
    if (better(ids[x], ids[z])) return x;
    return better(ids[y], ids[z]) ? z : y;
  };
  std::swap(ids[median_of_three(lo, lo + (hi - lo) / 2, hi - 1)], ids[hi - 1]);
  const int32_t pivot = ids[hi - 1];
  int32_t store = lo;
  double mass = 0.0;
  for (int32_t i = lo; i < hi - 1; ++i) {
    if (better(ids[i], pivot)) {
      mass += weight_of[ids[i]];
      std::swap(ids[i], ids[store++]);
    }
  }
  std::swap(ids[store], ids[hi - 1]);
  better_mass = mass;
  return store;
}

}  // namespace

Sampler::Sampler(const SamplerParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
  validate(params);
  if (n_vocab < 1) fail("sampling: vocabulary size must be >= 1, got ", n_vocab);
  ids_.resize(n_vocab);
  weights_.resize(n_vocab);
  history_.resize(params.repeat_last_n);
  penalized_.assign(n_vocab, 0);
}

void Sampler::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_) {
    fail("sampling: token id ", token, " is outside the vocabulary of ", n_vocab_);
  }
  const auto capacity = static_cast<int32_t>(history_.size());
  if (capacity == 0) return;
  history_[history_head_] = token;
  history_head_ = (history_head_ + 1) % capacity;
  history_size_ = std::min(history_size_ + 1, capacity);
}

void Sampler::reset() {
  history_head_ = 0;
  history_size_ = 0;
  rng_.seed(params_.seed);
}

int32_t Sampler::sample(std::span<float> logits) {
  if (logits.size() != static_cast<size_t>(n_vocab_)) {
    fail("sampling: got ", logits.size(), " logits for a vocabulary of ", n_vocab_);
  }
  apply_repetition_penalty(logits);
  const float* l = logits.data();

  // One pass finds the argmax and rejects logits no distribution can be built from; strict '>'
  // keeps the lowest id among ties.
  float max_logit = -std::numeric_limits<float>::infinity();
  int32_t best = 0;
  bool has_nan = false;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    if (l[i] > max_logit) {
      max_logit = l[i];
      best = i;
    }
    has_nan |= std::isnan(l[i]);
  }
  if (has_nan) fail("sampling: logits contain NaN");
  if (std::isinf(max_logit)) {
    fail(max_logit > 0 ? "sampling: logits contain +inf" : "sampling: every token is masked");
  }
  if (params_.temp <= 0.0f) return best;

  int32_t n = n_vocab_;
  bool sorted = false;
  if (params_.top_k > 0 && params_.top_k < n_vocab_) {
    n = keep_top_k(l);
    sorted = true;
  } else {
    std::iota(ids_.begin(), ids_.end(), 0);
  }
  // top-p is defined on the distribution left by top-k, before min-p. The weights are stored by
  // token id for the nucleus search; the maximum survives every filter, so none overflows.
  double normalizer = 0.0;
  if (params_.top_p < 1.0f) {
    for (int32_t i = 0; i < n; ++i) {
      const int32_t id = ids_[i];
      weights_[id] = std::exp(l[id] - max_logit);
      normalizer += weights_[id];
    }
  }
  // Both filters keep a prefix of the candidates in logit order, so applying min-p first gives
  // llama.cpp's top-p-then-min-p result while leaving top-p fewer candidates to search.
  if (params_.min_p > 0.0f) n = keep_at_least(l, n, max_logit + std::log(params_.min_p));
  if (params_.top_p < 1.0f) n = keep_top_p(l, n, sorted, normalizer);
  return draw(l, n, max_logit);
}

void Sampler::apply_repetition_penalty(std::span<float> logits) {
  const float penalty = params_.repeat_penalty;
  if (penalty == 1.0f || history_size_ == 0) return;
  // A token repeated several times in the window is penalized once, as in llama.cpp.
  for (int32_t i = 0; i < history_size_; ++i) {
    const int32_t token = history_[i];
    if (penalized_[token]) continue;
    penalized_[token] = 1;
    float& logit = logits[token];
    logit = logit <= 0.0f ? logit * penalty : logit / penalty;
  }
  for (int32_t i = 0; i < history_size_; ++i) penalized_[history_[i]] = 0;
}

int32_t Sampler::keep_top_k(const float* logits) {
  const int32_t k = params_.top_k;
  int32_t* ids = ids_.data();
  const BetterLogit better{logits};
  if (k > n_vocab_ / kHeapMaxFraction) {
    std::iota(ids, ids + n_vocab_, 0);
    std::nth_element(ids, ids + k, ids + n_vocab_, better);
  } else {
    // One streaming pass against the worst kept logit: almost every token fails a single
    // compare of contiguous floats, far cheaper than nth_element's indirect comparisons.
    std::iota(ids, ids + k, 0);
    std::make_heap(ids, ids + k, better);  // front: the worst kept token
    float worst = logits[ids[0]];
    for (int32_t id = k; id < n_vocab_; ++id) {
      if (logits[id] > worst) {  // on equal logits the earlier, lower id stays
        std::pop_heap(ids, ids + k, better);
        ids[k - 1] = id;
        std::push_heap(ids, ids + k, better);
        worst = logits[ids[0]];
      }
    }
  }
  // The kept set is unique under the total order, but its arrangement is not; sorting it makes
  // the draw order, and so the drawn token, independent of the standard library.
  std::sort(ids, ids + k, better);
  return k;
}

int32_t Sampler::keep_at_least(const float* logits, int32_t n, float min_logit) {
  // Stable compaction: the survivors keep their order, so a sorted list stays sorted and an
  // unsorted one stays in id order, both deterministic.
  int32_t kept = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = ids_[i];
    if (logits[id] >= min_logit) ids_[kept++] = id;
  }
  return kept;
}

int32_t Sampler::keep_top_p(const float* logits, int32_t n, bool sorted, double normalizer) {
  int32_t* ids = ids_.data();
  const float* weight_of = weights_.data();
  const BetterLogit better{logits};
  const double target = static_cast<double>(params_.top_p) * normalizer;
  int32_t lo = 0, hi = n;
  double mass_before = 0.0;  // of ids[0, lo), all inside the nucleus
  if (!sorted) {
    // Weighted quickselect for the token whose cumulative probability crosses top_p: expected
    // O(n) where a sort of a wide nucleus would cost O(n log n). The nucleus always lies in
    // ids[0, hi); past the usual depth it falls back to sorting what is left.
    int depth_left = 2 * std::bit_width(static_cast<uint32_t>(n));
    while (hi - lo > kSortBelow && depth_left-- > 0) {
      double better_mass = 0.0;
      const int32_t p = partition(ids, lo, hi, better, weight_of, better_mass);
      if (mass_before + better_mass >= target) {
        hi = p;
        continue;
      }
      mass_before += better_mass + weight_of[ids[p]];
      if (mass_before >= target) return p + 1;
      lo = p + 1;
    }
    std::sort(ids + lo, ids + hi, better);
  }
  double cumulative = mass_before;
  for (int32_t i = lo; i < hi; ++i) {
    cumulative += weight_of[ids[i]];
    // The token that crosses the threshold is kept, as in llama.cpp.
    if (cumulative >= target) return i + 1;
  }
  // Reached when nothing is cut, or when rounding in a different summation order leaves the
  // running sum a hair short of a crossing the partition already established inside ids[0, hi).
  return hi;
}

int32_t Sampler::draw(const float* logits, int32_t n, float max_logit) {
  // Divide rather than multiply by 1 / temp: a tiny temp makes the reciprocal infinite and the
  // top token's 0 * inf a NaN, while 0 / temp stays 0.
  const float temp = params_.temp;
  double total = 0.0;
  for (int32_t i = 0; i < n; ++i) {
    weights_[i] = std::exp((logits[ids_[i]] - max_logit) / temp);
    total += weights_[i];
  }
  const double target = next_uniform() * total;
  double cumulative = 0.0;
  int32_t last_possible = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (weights_[i] <= 0.0f) continue;
    cumulative += weights_[i];
    if (target < cumulative) return ids_[i];
    last_possible = i;
  }
  // Rounding can leave target a hair above the running sum; fall back to the last token that
  // had any weight rather than one that underflowed to zero.
  return ids_[last_possible];
}

double Sampler::next_uniform() {
  // 53 random bits scaled by 2^-53: exactly representable and identical on every platform,
  // unlike std::uniform_real_distribution whose algorithm is implementation-defined.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

}  // namespace hearth
