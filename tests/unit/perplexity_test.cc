// The perplexity math of src/eval: log-softmax NLL, KL divergence, running mean and standard error,
// chunking (llama.cpp's method).
#include "eval/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"

namespace hearth::eval {
namespace {

TEST(Perplexity, LogProbMatchesHandComputation) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(log_prob(logits, 0), 1.0 - std::log(z), 1e-12);
  EXPECT_NEAR(log_prob(logits, 2), 3.0 - std::log(z), 1e-12);
  std::vector<double> ls(3);
  log_softmax(logits, ls);
  EXPECT_NEAR(ls[1], 2.0 - std::log(z), 1e-12);
  EXPECT_NEAR(std::exp(ls[0]) + std::exp(ls[1]) + std::exp(ls[2]), 1.0, 1e-12);
}

TEST(Perplexity, LogProbIsStableForLargeLogits) {
  const std::vector<float> logits = {1000.0f, 1000.0f, -1000.0f};
  EXPECT_NEAR(log_prob(logits, 0), std::log(0.5), 1e-12);
  const double tiny = log_prob(logits, 2);
  EXPECT_TRUE(std::isfinite(tiny));
  EXPECT_NEAR(tiny, -2000.0 - std::log(2.0), 1e-9);
}

TEST(Perplexity, BadTargetThrows) {
  const std::vector<float> logits = {0.0f, 0.0f};
  EXPECT_THROW(log_prob(logits, 2), Error);
  EXPECT_THROW(log_prob(logits, -1), Error);
}

TEST(Perplexity, UniformLogitsGiveVocabularySize) {
  const int64_t n_vocab = 37, n_ctx = 16;
  const std::vector<int32_t> tokens = [&] {
    std::vector<int32_t> t(static_cast<size_t>(3 * n_ctx));
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7) % n_vocab);
    return t;
  }();
  const ChunkPlan plan = plan_chunks(static_cast<int64_t>(tokens.size()), n_ctx);
  ASSERT_EQ(plan.n_chunks, 3);
  const std::vector<float> logits(static_cast<size_t>(n_ctx * n_vocab), 0.25f);
  MeanStat nll;
  for (int64_t i = 0; i < plan.n_chunks; ++i) {
    score_chunk(plan, std::span(tokens).subspan(static_cast<size_t>(i * n_ctx), static_cast<size_t>(n_ctx)), logits,
                n_vocab, nll);
  }
  EXPECT_EQ(nll.count(), static_cast<uint64_t>(3 * plan.scored_per_chunk()));
  const Perplexity p = perplexity(nll);
  EXPECT_NEAR(p.value, static_cast<double>(n_vocab), 1e-9);
  EXPECT_NEAR(p.error, 0.0, 1e-9);
}

TEST(Perplexity, ScoresOnlyTheSecondHalf) {
  // n_ctx 6: rows 3 and 4 predict tokens 4 and 5; the other rows are never read (NaN).
  const int64_t n_vocab = 3, n_ctx = 6;
  const ChunkPlan plan = plan_chunks(12, n_ctx);
  EXPECT_EQ(plan.first, 3);
  EXPECT_EQ(plan.scored_per_chunk(), 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits(static_cast<size_t>(n_ctx * n_vocab), nan);
  const float row3[] = {0.0f, 1.0f, 2.0f}, row4[] = {2.0f, 0.0f, 0.0f};
  std::copy(row3, row3 + 3, logits.begin() + 9);
  std::copy(row4, row4 + 3, logits.begin() + 12);
  const std::vector<int32_t> chunk = {1, 0, 0, 0, 1, 2};
  MeanStat nll;
  score_chunk(plan, chunk, logits, n_vocab, nll);
  ASSERT_EQ(nll.count(), 2u);
  const double nll4 = -(1.0 - std::log(1 + std::exp(1.0) + std::exp(2.0)));  // row 3 -> token 1
  const double nll5 = -(0.0 - std::log(std::exp(2.0) + 2.0));                // row 4 -> token 2
  EXPECT_NEAR(nll.mean(), (nll4 + nll5) / 2, 1e-12);
  EXPECT_NEAR(perplexity(nll).value, std::exp((nll4 + nll5) / 2), 1e-12);
}

TEST(Perplexity, MeanAndStandardErrorAsLlamaCpp) {
  MeanStat s;
  for (double x : {1.0, 2.0, 3.0, 4.0}) s.add(x);
  EXPECT_EQ(s.count(), 4u);
  EXPECT_DOUBLE_EQ(s.mean(), 2.5);
  // llama.cpp: sqrt((mean(x^2) - mean(x)^2) / (n - 1)).
  const double m2 = (1 + 4 + 9 + 16) / 4.0;
  EXPECT_NEAR(s.standard_error(), std::sqrt((m2 - 2.5 * 2.5) / 3), 1e-12);
  const Perplexity p = perplexity(s);
  EXPECT_NEAR(p.value, std::exp(2.5), 1e-9);
  EXPECT_NEAR(p.error, std::exp(2.5) * s.standard_error(), 1e-9);

  MeanStat one;
  one.add(3.0);
  EXPECT_EQ(one.standard_error(), 0.0);
}

TEST(Perplexity, KlOfIdenticalDistributionsIsZero) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> a(1000);
  for (auto& x : a) x = d(rng);
  EXPECT_EQ(kl_divergence(a, a), 0.0);
  // A shift of every logit leaves the distribution unchanged.
  std::vector<float> b = a;
  for (auto& x : b) x += 4.0f;
  EXPECT_NEAR(kl_divergence(a, b), 0.0, 1e-6);
}

TEST(Perplexity, KlMatchesDirectComputation) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> a(257), b(257);
    for (auto& x : a) x = d(rng);
    for (auto& x : b) x = d(rng);
    double za = 0, zb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      za += std::exp(static_cast<double>(a[i]));
      zb += std::exp(static_cast<double>(b[i]));
    }
    double want = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double p = std::exp(static_cast<double>(a[i])) / za;
      const double q = std::exp(static_cast<double>(b[i])) / zb;
      want += p * std::log(p / q);
    }
    EXPECT_NEAR(kl_divergence(a, b), want, 1e-10 * std::max(1.0, want));
    EXPECT_GT(kl_divergence(a, b), 0.0);
  }
}

TEST(Perplexity, ArgmaxTakesTheFirstMaximum) {
  const std::vector<float> v = {0.0f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(argmax(v), 1);
}

TEST(Perplexity, CompareChunkCountsAgreement) {
  const int64_t n_vocab = 2, n_ctx = 4;  // scored rows: 2 (only)
  const ChunkPlan plan = plan_chunks(8, n_ctx);
  ASSERT_EQ(plan.scored_per_chunk(), 1);
  const std::vector<float> base = {0, 0, 0, 0, 1, 0, 0, 0};
  const std::vector<float> same = {9, 9, 9, 9, 1, 0, 9, 9};
  const std::vector<float> flipped = {0, 0, 0, 0, 0, 1, 0, 0};
  MeanStat kl;
  uint64_t agree = 0;
  compare_chunk(plan, base, same, n_vocab, kl, agree);
  EXPECT_EQ(agree, 1u);
  EXPECT_EQ(kl.mean(), 0.0);
  compare_chunk(plan, base, flipped, n_vocab, kl, agree);
  EXPECT_EQ(agree, 1u);
  EXPECT_EQ(kl.count(), 2u);
  const double p = 1 / (1 + std::exp(-1.0));  // softmax({1, 0})[0]
  const double kl_flip = p * std::log(p / (1 - p)) + (1 - p) * std::log((1 - p) / p);
  EXPECT_NEAR(kl.mean(), kl_flip / 2, 1e-12);
}

TEST(Perplexity, ChunkPlanAndInput) {
  ChunkPlan p = plan_chunks(1000, 128);
  EXPECT_EQ(p.n_chunks, 7);
  EXPECT_EQ(p.first, 64);
  EXPECT_EQ(p.scored_per_chunk(), 63);
  EXPECT_EQ(plan_chunks(1000, 128, 3).n_chunks, 3);
  EXPECT_EQ(plan_chunks(1000, 128, 100).n_chunks, 7);
  try {
    plan_chunks(255, 128);
    FAIL() << "a text of 255 tokens must be too short for chunks of 128";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("255"), std::string::npos) << msg;
    EXPECT_NE(msg.find("256"), std::string::npos) << msg;
  }
  EXPECT_THROW(plan_chunks(100, 3), Error);

  std::vector<int32_t> tokens(20);
  for (int i = 0; i < 20; ++i) tokens[static_cast<size_t>(i)] = 100 + i;
  p = plan_chunks(20, 8);
  EXPECT_EQ(chunk_input(tokens, p, 1, 1), (std::vector<int32_t>{1, 109, 110, 111, 112, 113, 114, 115}));
  EXPECT_EQ(chunk_input(tokens, p, 0, -1), (std::vector<int32_t>{100, 101, 102, 103, 104, 105, 106, 107}));
  EXPECT_THROW(chunk_input(tokens, p, 2, 1), Error);
}

}  // namespace
}  // namespace hearth::eval
