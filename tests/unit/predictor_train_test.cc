// The native predictor trainer (sparse/predictor_train.h): it must learn a planted low-rank
// firing rule to the target recall on held-out tokens while still predicting most neurons off,
// be bit-for-bit reproducible whatever the thread count, pick its width by bytes per token, and
// reject bad input with a clear error.
#include "sparse/predictor_train.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/error.h"

namespace hearth::sparse {
namespace {

struct Planted {
  PredictorSamples train, test;
};

// x = (1, g) with g ~ N(0, I): the constant feature plays the shared direction of the residual
// stream, the only way a bias-free predictor can express a firing rate. Neuron i fires iff
// w_i · relu(V x) + c_i > 0 for a random V [true_rank, n_embd]; c_i is set from a calibration draw
// so that firing rates follow a power law, 90% for the hottest neuron down to a 5% floor. Noise
// of `noise` times the spread of w_i · relu(V x) is added before the test, so that, as with real
// neurons, no predictor is exact.
Planted make_planted(int64_t n_embd, int64_t n_ff, int64_t true_rank, int64_t n_train,
                     int64_t n_test, uint64_t seed, float noise = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(true_rank * n_embd),
      w(n_ff * true_rank);  // [true_rank, n_embd], [n_ff, true_rank]
  for (float& e : v) e = normal(rng) / std::sqrt(static_cast<float>(n_embd));
  for (float& e : w) e = normal(rng);

  auto draw_x = [&](std::vector<float>& x) {
    x[0] = 1.0f;
    for (int64_t k = 1; k < n_embd; ++k) x[k] = normal(rng);
  };
  auto pre_bias = [&](const std::vector<float>& x, std::vector<float>& z) {  // z [n_ff]
    std::vector<float> h(true_rank, 0.0f);
    for (int64_t r = 0; r < true_rank; ++r) {
      for (int64_t k = 0; k < n_embd; ++k) h[r] += v[r * n_embd + k] * x[k];
      h[r] = std::max(h[r], 0.0f);
    }
    for (int64_t i = 0; i < n_ff; ++i) {
      z[i] = 0.0f;
      for (int64_t r = 0; r < true_rank; ++r) z[i] += w[i * true_rank + r] * h[r];
    }
  };

  constexpr int64_t kCalibration = 4000;
  std::vector<float> x(n_embd), z(n_ff);
  std::vector<std::vector<float>> per_neuron(n_ff, std::vector<float>(kCalibration));
  for (int64_t t = 0; t < kCalibration; ++t) {
    draw_x(x);
    pre_bias(x, z);
    for (int64_t i = 0; i < n_ff; ++i) per_neuron[i][t] = z[i];
  }
  std::vector<float> bias(n_ff), spread(n_ff);
  for (int64_t i = 0; i < n_ff; ++i) {
    double sum = 0, sum2 = 0;
    for (float e : per_neuron[i]) {
      sum += e;
      sum2 += double{e} * e;
    }
    const double mean = sum / kCalibration;
    spread[i] = static_cast<float>(std::sqrt(std::max(0.0, sum2 / kCalibration - mean * mean)));
    const double rate = std::max(0.05, 0.9 * std::pow(static_cast<double>(i + 1), -0.8));
    auto& col = per_neuron[i];
    const auto q = static_cast<int64_t>((1.0 - rate) * kCalibration);
    std::nth_element(col.begin(), col.begin() + q, col.end());
    bias[i] = -col[q];
  }

  Planted p;
  for (PredictorSamples* s : {&p.train, &p.test}) {
    s->n_embd = n_embd;
    s->n_ff = n_ff;
  }
  std::vector<uint8_t> fired(n_ff);
  for (int64_t t = 0; t < n_train + n_test; ++t) {
    draw_x(x);
    pre_bias(x, z);
    for (int64_t i = 0; i < n_ff; ++i) {
      fired[i] = z[i] + bias[i] + noise * spread[i] * normal(rng) > 0.0f;
    }
    (t < n_train ? p.train : p.test).add(x.data(), fired.data());
  }
  return p;
}

double firing_rate(const PredictorSamples& s) {
  double sum = 0;
  for (uint8_t f : s.fired) sum += f;
  return sum / static_cast<double>(s.fired.size());
}

PredictorSamples tail(const PredictorSamples& s, int64_t n) {
  PredictorSamples out{s.n_embd, s.n_ff, {}, {}};
  const int64_t begin = s.size() - n;
  out.x.assign(s.x.begin() + begin * s.n_embd, s.x.end());
  out.fired.assign(s.fired.begin() + begin * s.n_ff, s.fired.end());
  return out;
}

TEST(PredictorTrain, LearnsPlantedRuleToTargetRecall) {
  const Planted data = make_planted(32, 128, 8, 12000, 3000, 7, 0.2f);
  PredictorTrainOptions o;
  o.ranks = {16};
  o.epochs = 20;
  o.batch = 128;
  o.learning_rate = 0.03f;
  const auto start = std::chrono::steady_clock::now();
  const TrainedPredictor p = train_predictor(data.train, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const PredictorQuality q = evaluate_predictor(p, data.test);
  const double rate = firing_rate(data.test);
  std::printf(
      "planted: %.2f s, loss %.4f -> %.4f, pos_weight %.2f, validation recall %.4f; held-out "
      "recall %.4f precision %.4f predicted sparsity %.4f true sparsity %.4f\n",
      seconds, p.loss.front(), p.loss.back(), p.pos_weight, p.validation.recall, q.recall,
      q.precision, q.predicted_sparsity, q.true_sparsity);

  ASSERT_EQ(p.rank, 16);
  ASSERT_EQ(p.loss.size(), 20u);
  EXPECT_LT(p.loss.back(), 0.5f * p.loss.front());
  EXPECT_GE(p.validation.recall, 0.95);
  EXPECT_GE(q.recall, 0.93);
  EXPECT_NEAR(q.true_sparsity, 1.0 - rate, 1e-12);
  // Useful: most neurons are skipped, and a predicted neuron is far likelier to fire than average.
  EXPECT_GT(q.predicted_sparsity, 0.8);
  EXPECT_GT(q.precision, 5.0 * rate);
}

TEST(PredictorTrain, ThresholdIsTheLargestReachingTarget) {
  const Planted data = make_planted(16, 48, 4, 2000, 0, 3);
  PredictorTrainOptions o;
  o.ranks = {8};
  o.epochs = 4;
  o.target_recall = 0.9;
  const TrainedPredictor p = train_predictor(data.train, o);
  const PredictorSamples val = tail(data.train, 300);  // 15% of 2000
  EXPECT_EQ(evaluate_predictor(p, val).recall, p.validation.recall);
  EXPECT_GE(p.validation.recall, 0.9);
  TrainedPredictor higher = p;
  higher.threshold = std::nextafter(p.threshold, INFINITY);
  EXPECT_LT(evaluate_predictor(higher, val).recall, 0.9);
}

TEST(PredictorTrain, NothingFiredPredictsNothing) {
  PredictorSamples s{8, 5, {}, {}};
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<uint8_t> none(5, 0);
  for (int t = 0; t < 40; ++t) {
    std::vector<float> x(8);
    for (float& e : x) e = normal(rng);
    s.add(x.data(), none.data());
  }
  PredictorTrainOptions o;
  o.ranks = {2};
  o.epochs = 2;
  const TrainedPredictor p = train_predictor(s, o);
  EXPECT_EQ(p.validation.recall, 1.0);
  EXPECT_EQ(p.validation.predicted_sparsity, 1.0);
  EXPECT_EQ(evaluate_predictor(p, s).predicted_sparsity, 1.0);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PredictorTrainSlow, DeterministicForSeedWhateverThreads) {
  const Planted data = make_planted(24, 70, 6, 3001, 0, 11);  // odd sizes: partial blocks
  PredictorTrainOptions o;
  o.ranks = {13};
  o.epochs = 3;
  o.batch = 100;
  o.n_threads = 1;
  const TrainedPredictor a = train_predictor(data.train, o);
  o.n_threads = 2;
  const TrainedPredictor b = train_predictor(data.train, o);
  o.n_threads = 3;
  const TrainedPredictor c = train_predictor(data.train, o);
  for (const TrainedPredictor* other : {&b, &c}) {
    EXPECT_TRUE(same_bits(a.fc1, other->fc1));
    EXPECT_TRUE(same_bits(a.fc2, other->fc2));
    EXPECT_TRUE(same_bits(a.loss, other->loss));
    EXPECT_EQ(std::memcmp(&a.threshold, &other->threshold, sizeof(float)), 0);
  }
  o.seed = 2;
  const TrainedPredictor d = train_predictor(data.train, o);
  EXPECT_FALSE(same_bits(a.fc1, d.fc1));
}

// Narrow predictors cannot separate the neurons of a rank-8 rule, so at the same recall they
// predict far more of them active; whether that is worth more width depends on the costs.
TEST(PredictorTrain, AutoRankMinimisesBytesPerToken) {
  const Planted data = make_planted(32, 128, 8, 6000, 0, 5, 0.2f);
  PredictorTrainOptions o;
  o.ranks = {16, 1, 4};  // any order: tried smallest first
  o.epochs = 10;
  o.batch = 128;
  o.learning_rate = 0.03f;

  auto check_rule = [&](const TrainedPredictor& p) {
    ASSERT_EQ(p.candidates.size(), 3u);
    size_t best = 0;
    for (size_t i = 0; i < p.candidates.size(); ++i) {
      const PredictorCandidate& c = p.candidates[i];
      EXPECT_EQ(c.rank, o.ranks[(i + 1) % 3]);
      EXPECT_GE(c.validation.recall, o.target_recall);
      const double bytes = static_cast<double>(c.rank) * o.bytes_per_rank +
                           (1.0 - c.validation.predicted_sparsity) * 128 * o.bytes_per_neuron;
      EXPECT_DOUBLE_EQ(c.bytes_per_token, bytes);
      if (c.bytes_per_token < p.candidates[best].bytes_per_token) best = i;
    }
    EXPECT_EQ(p.rank, p.candidates[best].rank);
    EXPECT_EQ(p.threshold, p.candidates[best].threshold);
    EXPECT_EQ(p.validation.predicted_sparsity, p.candidates[best].validation.predicted_sparsity);
    EXPECT_EQ(p.loss.back(), p.candidates[best].final_loss);
    EXPECT_EQ(static_cast<int64_t>(p.fc1.size()), p.rank * 32);
    EXPECT_EQ(static_cast<int64_t>(p.fc2.size()), p.rank * 128);
  };

  std::vector<int64_t> progress_ranks;
  const TrainedPredictor free_bytes =
      train_predictor(data.train, o, [&](int64_t rank, int epoch, int epochs, float loss) {
        EXPECT_EQ(epochs, 10);
        if (epoch == 1) progress_ranks.push_back(rank);
      });
  check_rule(free_bytes);
  EXPECT_EQ(free_bytes.rank, 1);  // no costs: the smallest width
  EXPECT_EQ(progress_ranks, (std::vector<int64_t>{1, 4, 16}));
  for (const PredictorCandidate& c : free_bytes.candidates) {
    std::printf("rank %2ld: predicted sparsity %.4f precision %.4f\n", static_cast<long>(c.rank),
                c.validation.predicted_sparsity, c.validation.precision);
  }
  const double narrow = free_bytes.candidates[0].validation.predicted_sparsity;
  const double wide = free_bytes.candidates[2].validation.predicted_sparsity;
  ASSERT_GT(wide, narrow + 0.3);

  o.bytes_per_neuron = 3 * 32 * 2;  // up, gate and down rows of f16
  o.bytes_per_rank = (32 + 128) * 2;
  const TrainedPredictor neurons_dear = train_predictor(data.train, o);
  check_rule(neurons_dear);
  EXPECT_EQ(neurons_dear.rank, 16);

  o.bytes_per_rank = 1e6;
  const TrainedPredictor width_dear = train_predictor(data.train, o);
  check_rule(width_dear);
  EXPECT_EQ(width_dear.rank, 1);
}

TEST(PredictorTrain, ScoresMatchNaiveLoops) {
  constexpr int64_t kEmbd = 7, kFf = 11, kRank = 5;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  TrainedPredictor p;
  p.rank = kRank;
  p.fc1.resize(kRank * kEmbd);
  p.fc2.resize(kFf * kRank);
  for (float& e : p.fc1) e = u(rng);
  for (float& e : p.fc2) e = u(rng);
  p.threshold = 0.1f;

  PredictorSamples s{kEmbd, kFf, {}, {}};
  int64_t predicted = 0;
  for (int t = 0; t < 50; ++t) {
    std::vector<float> x(kEmbd);
    for (float& e : x) e = 3.0f * u(rng);
    std::vector<float> score(kFf);
    predictor_scores(p, x.data(), score.data());
    std::vector<uint8_t> fired(kFf);
    for (int64_t i = 0; i < kFf; ++i) {
      double want = 0;
      for (int64_t r = 0; r < kRank; ++r) {
        double h = 0;
        for (int64_t k = 0; k < kEmbd; ++k) h += double{p.fc1[r * kEmbd + k]} * x[k];
        want += double{p.fc2[i * kRank + r]} * std::max(h, 0.0);
      }
      EXPECT_NEAR(score[i], want, 1e-5 * (1.0 + std::fabs(want)));
      fired[i] = t % 2 == 0;  // arbitrary labels, for evaluate_predictor's counts
      predicted += score[i] >= p.threshold;
    }
    s.add(x.data(), fired.data());
  }
  // evaluate_predictor scores in batches; it must count the same predictions.
  const PredictorQuality q = evaluate_predictor(p, s);
  EXPECT_DOUBLE_EQ(q.predicted_sparsity, 1.0 - static_cast<double>(predicted) / (50.0 * kFf));
  EXPECT_DOUBLE_EQ(q.true_sparsity, 0.5);  // even tokens fire everywhere, odd ones nowhere
}

TEST(PredictorTrain, BadInputThrows) {
  const Planted data = make_planted(8, 6, 2, 40, 0, 1);
  PredictorTrainOptions o;
  o.ranks = {4};
  o.epochs = 1;
  EXPECT_NO_THROW(train_predictor(data.train, o));

  const std::vector<std::function<void(PredictorSamples&)>> bad_samples = {
      [](PredictorSamples& s) { s.n_ff = 0; },
      [](PredictorSamples& s) { s.n_embd = 0; },
      [](PredictorSamples& s) { s.x.pop_back(); },  // not a whole number of inputs
      [](PredictorSamples& s) { s.fired.resize(s.fired.size() - s.n_ff); },  // a label row short
      [](PredictorSamples& s) { s.fired[3] = 2; },
      [](PredictorSamples& s) { s.x[5] = NAN; },
      [](PredictorSamples& s) { s = tail(s, 9); },  // too few samples
  };
  for (size_t i = 0; i < bad_samples.size(); ++i) {
    PredictorSamples s = data.train;
    bad_samples[i](s);
    EXPECT_THROW(train_predictor(s, o), Error) << "bad samples case " << i;
  }
  const std::vector<std::function<void(PredictorTrainOptions&)>> bad_options = {
      [](PredictorTrainOptions& b) { b.ranks = {}; },
      [](PredictorTrainOptions& b) {
        b.ranks = {4, 0};
      },
      [](PredictorTrainOptions& b) { b.target_recall = 1.5; },
      [](PredictorTrainOptions& b) { b.epochs = 0; },
      [](PredictorTrainOptions& b) { b.batch = 0; },
      [](PredictorTrainOptions& b) { b.validation = 1.0; },
      [](PredictorTrainOptions& b) { b.n_threads = 0; },
      [](PredictorTrainOptions& b) { b.learning_rate = -1; },
  };
  for (size_t i = 0; i < bad_options.size(); ++i) {
    PredictorTrainOptions bad = o;
    bad_options[i](bad);
    EXPECT_THROW(train_predictor(data.train, bad), Error) << "bad options case " << i;
  }

  PredictorSamples unset;
  const std::vector<float> x(4, 0.0f);
  const std::vector<uint8_t> fired(4, 0);
  EXPECT_THROW(unset.add(x.data(), fired.data()), Error);

  TrainedPredictor p = train_predictor(data.train, o);
  PredictorSamples wider = data.train;
  wider.n_embd = 4;  // 40 * 8 values read as 80 inputs of 4: fired rows no longer match
  EXPECT_THROW(evaluate_predictor(p, wider), Error);
  p.fc2.pop_back();
  EXPECT_THROW(evaluate_predictor(p, data.train), Error);
}

}  // namespace
}  // namespace hearth::sparse
