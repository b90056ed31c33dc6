#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "hearth/sampling.h"
#include "sampling/sampler.h"

namespace hearth {
namespace {

SamplerParams unfiltered(float temp) {
  SamplerParams p;
  p.temp = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// Test inputs from the raw mt19937_64 stream so they are the same with every standard library.
std::vector<float> random_logits(int32_t n, uint64_t seed, float scale = 4.0f) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  for (float& x : out) x = scale * (2.0f * static_cast<float>((rng() >> 11) * 0x1.0p-53) - 1.0f);
  return out;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> copy = logits;
    ++counts[s.sample(copy)];
  }
  return counts;
}

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  for (float temp : {0.0f, -1.0f}) {
    Sampler s(unfiltered(temp), 6);
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 3.0f, 3.0f, 1.0f};
    EXPECT_EQ(s.sample(logits), 3);
    std::vector<float> other = random_logits(6, 7);
    EXPECT_EQ(s.sample(other), argmax(random_logits(6, 7)));
  }
}

TEST(Sampler, TinyTemperatureActsGreedy) {
  Sampler s(unfiltered(1e-30f), 1000);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = random_logits(1000, seed);
    const int32_t expected = argmax(logits);
    EXPECT_EQ(s.sample(logits), expected);
  }
}

TEST(Sampler, TopKOneEqualsGreedy) {
  SamplerParams p;
  p.temp = 1.5f;
  p.top_k = 1;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  Sampler s(p, 5000);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<float> logits = random_logits(5000, seed);
    const int32_t expected = argmax(logits);
    EXPECT_EQ(s.sample(logits), expected);
  }
}

TEST(Sampler, SmallTopPKeepsOnlyTheTopToken) {
  // The top token alone holds at least 1/n_vocab = 5e-4 of the mass, more than top_p.
  SamplerParams p = unfiltered(1.0f);
  p.top_p = 1e-4f;
  Sampler s(p, 2000);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<float> logits = random_logits(2000, seed, 1.0f);
    const int32_t expected = argmax(logits);
    EXPECT_EQ(s.sample(logits), expected);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: min_p = 0.2 keeps p >= 0.1, so token 3 never appears.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplerParams p = unfiltered(1.0f);
  p.min_p = 0.2f;
  Sampler s(p, 4);
  const std::vector<int> counts = histogram(s, logits, 20000);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[2], 0);
  EXPECT_EQ(counts[3], 0);

  p.min_p = 1.0f;
  Sampler only_top(p, 4);
  const std::vector<int> top = histogram(only_top, logits, 1000);
  EXPECT_EQ(top[0], 1000);
}

TEST(Sampler, RepetitionPenaltyChangesTheChoice) {
  SamplerParams p = unfiltered(0.0f);
  p.repeat_penalty = 1.1f;
  p.repeat_last_n = 3;
  Sampler s(p, 4);
  // Positive logit: 2.0 / 1.1 = 1.82 falls below token 1's 1.9.
  const std::vector<float> positive = {2.0f, 1.9f, -3.0f, -3.0f};
  auto pick = [&](std::vector<float> logits) { return s.sample(logits); };
  EXPECT_EQ(pick(positive), 0);
  s.accept(0);
  EXPECT_EQ(pick(positive), 1);
  // Repeats inside the window count once: 2.0 / 1.1 still beats 1.8, not 2.0 / 1.21.
  s.accept(0);
  EXPECT_EQ(pick({2.0f, 1.8f, -3.0f, -3.0f}), 0);
  // Negative logit: -1.0 * 1.1 = -1.1 falls below -1.05.
  EXPECT_EQ(pick({-1.0f, -1.05f, -3.0f, -3.0f}), 1);
  // Three other tokens push token 0 out of the window.
  s.accept(2);
  s.accept(3);
  s.accept(2);
  EXPECT_EQ(pick(positive), 0);
  s.accept(0);
  EXPECT_EQ(pick(positive), 1);
  s.reset();
  EXPECT_EQ(pick(positive), 0);
}

TEST(Sampler, PenaltyModifiesLogitsInPlaceOnlyForHistory) {
  SamplerParams p = unfiltered(0.0f);
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  s.accept(1);
  s.accept(2);
  std::vector<float> logits = {1.0f, 4.0f, -4.0f};
  s.sample(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 2.0f, -8.0f}));
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  SamplerParams p;  // llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05, temp 0.8
  p.seed = 1234;
  const std::vector<float> logits = random_logits(32000, 99, 3.0f);
  auto run = [&](Sampler& s) {
    std::vector<int32_t> out;
    for (int i = 0; i < 1000; ++i) {
      std::vector<float> copy = logits;
      out.push_back(s.sample(copy));
    }
    return out;
  };
  Sampler a(p, 32000), b(p, 32000);
  const std::vector<int32_t> draws = run(a);
  EXPECT_EQ(draws, run(b));
  a.reset();
  EXPECT_EQ(draws, run(a));
  p.seed = 1235;
  Sampler c(p, 32000);
  EXPECT_NE(draws, run(c));
}

// Checks counts against probabilities within 5 standard deviations of a binomial count.
void expect_matches(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
  for (size_t i = 0; i < probs.size(); ++i) {
    const double sigma = std::sqrt(draws * probs[i] * (1.0 - probs[i]));
    EXPECT_NEAR(counts[i], draws * probs[i], 5.0 * sigma + 1.0) << "token " << i;
  }
}

std::vector<double> softmax(const std::vector<float>& logits, float temp) {
  std::vector<double> p(logits.size());
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - m) / temp);
  for (double& x : p) x /= sum;
  return p;
}

TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f};
  constexpr int kDraws = 200000;
  for (float temp : {0.7f, 1.0f, 2.0f}) {
    Sampler s(unfiltered(temp), 6);
    expect_matches(histogram(s, logits, kDraws), softmax(logits, temp), kDraws);
  }
}

TEST(Sampler, TopKRenormalizesOverTheKept) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f};
  SamplerParams p = unfiltered(0.9f);
  p.top_k = 3;
  Sampler s(p, 6);
  constexpr int kDraws = 100000;
  // Tokens 3, 5, 0 are the top three.
  std::vector<double> expected = softmax({1.0f, -1e9f, -1e9f, 2.0f, -1e9f, 1.5f}, 0.9f);
  expect_matches(histogram(s, logits, kDraws), expected, kDraws);
}

// The candidate set llama.cpp's chain would keep, by full sort: top-k, then top-p, then min-p.
std::vector<int32_t> reference_candidates(const std::vector<float>& logits, const SamplerParams& p) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ids.size()) ids.resize(p.top_k);
  const double m = logits[ids[0]];
  double z = 0.0;
  for (int32_t id : ids) z += std::exp(logits[id] - m);
  double cum = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cum += std::exp(logits[ids[i]] - m) / z;
    if (cum >= p.top_p) {
      ids.resize(i + 1);
      break;
    }
  }
  if (p.min_p > 0.0f) {
    const float min_logit = static_cast<float>(m) + std::log(p.min_p);
    std::erase_if(ids, [&](int32_t id) { return logits[id] < min_logit; });
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(Sampler, LargeVocabularyNucleusMatchesFullSortReference) {
  // Flat logits make the nucleus thousands of tokens wide, so the nucleus search partitions
  // several times before it sorts.
  constexpr int32_t kVocab = 64000;
  const std::vector<float> logits = random_logits(kVocab, 5, 0.5f);
  struct Case { int32_t top_k; float top_p; float min_p; };
  for (const Case c : {Case{0, 0.05f, 0.0f}, Case{0, 0.3f, 0.65f}, Case{5000, 0.5f, 0.0f},
                       Case{0, 1.0f, 0.9f}}) {
    SamplerParams p = unfiltered(1.0f);
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    const std::vector<int32_t> allowed = reference_candidates(logits, p);
    ASSERT_GT(allowed.size(), 300u);
    Sampler s(p, kVocab);
    std::vector<float> descending = logits;
    std::sort(descending.begin(), descending.end(), std::greater<>());
    int64_t highest_seen_rank = 0;
    std::vector<float> copy(kVocab);
    for (int i = 0; i < 100; ++i) {
      copy = logits;
      const int32_t token = s.sample(copy);
      ASSERT_TRUE(std::binary_search(allowed.begin(), allowed.end(), token))
          << "token " << token << " top_k " << c.top_k << " top_p " << c.top_p;
      const int64_t rank = std::upper_bound(descending.begin(), descending.end(), logits[token],
                                            std::greater<>()) - descending.begin();
      highest_seen_rank = std::max(highest_seen_rank, rank);
    }
    EXPECT_GT(highest_seen_rank, 100) << "draws stayed at the head of the nucleus";
  }
}

TEST(Sampler, InvalidParamsAreRejected) {
  auto rejects = [](auto mutate) {
    SamplerParams p;
    mutate(p);
    EXPECT_THROW(validate(p), Error);
    EXPECT_THROW(Sampler(p, 10), Error);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  rejects([&](SamplerParams& p) { p.temp = nan; });
  rejects([&](SamplerParams& p) { p.temp = inf; });
  rejects([](SamplerParams& p) { p.top_k = -1; });
  rejects([](SamplerParams& p) { p.top_p = 0.0f; });
  rejects([](SamplerParams& p) { p.top_p = 1.01f; });
  rejects([&](SamplerParams& p) { p.top_p = nan; });
  rejects([](SamplerParams& p) { p.min_p = -0.1f; });
  rejects([](SamplerParams& p) { p.min_p = 1.5f; });
  rejects([](SamplerParams& p) { p.repeat_penalty = 0.0f; });
  rejects([&](SamplerParams& p) { p.repeat_penalty = inf; });
  rejects([](SamplerParams& p) { p.repeat_last_n = -1; });
  rejects([](SamplerParams& p) { p.repeat_last_n = kMaxRepeatLastN + 1; });

  SamplerParams ok;
  ok.temp = -0.5f;  // greedy, as in llama.cpp
  ok.top_k = 1000000;
  ok.top_p = 1.0f;
  ok.min_p = 0.0f;
  ok.repeat_last_n = 0;
  EXPECT_NO_THROW(validate(ok));
  EXPECT_THROW(Sampler(ok, 0), Error);
}

TEST(Sampler, BadInputsAreRejected) {
  Sampler s(SamplerParams{}, 4);
  std::vector<float> wrong_size(5, 0.0f);
  EXPECT_THROW(s.sample(wrong_size), Error);
  std::vector<float> with_nan = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 2.0f};
  EXPECT_THROW(s.sample(with_nan), Error);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> masked = {-inf, -inf, -inf, -inf};
  EXPECT_THROW(s.sample(masked), Error);
  std::vector<float> plus_inf = {0.0f, inf, 1.0f, 2.0f};
  EXPECT_THROW(s.sample(plus_inf), Error);
  EXPECT_THROW(s.accept(4), Error);
  EXPECT_THROW(s.accept(-1), Error);
  // Masked tokens are fine as long as one remains.
  std::vector<float> partly = {-inf, 0.5f, -inf, -inf};
  EXPECT_EQ(s.sample(partly), 1);
}

}  // namespace
}  // namespace hearth
