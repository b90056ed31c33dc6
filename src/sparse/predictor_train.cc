// The public side of the predictor trainer: input checks, the choice of width and threshold, and
// measuring a predictor. The training itself is in predictor_train_fit.cc.
#include "sparse/predictor_train.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/error.h"
#include "sparse/predictor_train_internal.h"

namespace hearth::sparse {

int64_t PredictorSamples::size() const {
  return n_embd > 0 ? static_cast<int64_t>(x.size()) / n_embd : 0;
}

void PredictorSamples::add(const float* p, const uint8_t* fired_row) {
  if (n_embd <= 0 || n_ff <= 0) {
    fail("predictor samples: set n_embd and n_ff before adding (got ", n_embd, ", ", n_ff, ")");
  }
  x.insert(x.end(), p, p + n_embd);
  fired.insert(fired.end(), fired_row, fired_row + n_ff);
}

namespace {

constexpr int64_t kMinSamples = 10;
constexpr double kMaxAutoPosWeight = 10.0;

void check_samples(const PredictorSamples& s) {
  if (s.n_embd <= 0 || s.n_ff <= 0) {
    fail("predictor samples: n_embd and n_ff must be positive (got ", s.n_embd, ", ", s.n_ff, ")");
  }
  if (s.x.size() % s.n_embd != 0) {
    fail("predictor samples: ", s.x.size(), " input values is not a multiple of n_embd ", s.n_embd);
  }
  const int64_t n = s.size();
  if (static_cast<int64_t>(s.fired.size()) != n * s.n_ff) {
    fail("predictor samples: ", n, " inputs but ", s.fired.size(), " fired flags (expected ",
         n * s.n_ff, ")");
  }
  if (std::any_of(s.fired.begin(), s.fired.end(), [](uint8_t f) { return f > 1; })) {
    fail("predictor samples: fired flags must be 0 or 1");
  }
  if (!std::all_of(s.x.begin(), s.x.end(), [](float v) { return std::isfinite(v); })) {
    fail("predictor samples: an input value is not finite");
  }
}

void check_options(const PredictorTrainOptions& o) {
  if (o.ranks.empty()) fail("predictor training: no candidate rank given");
  for (int64_t r : o.ranks) {
    if (r <= 0) fail("predictor training: rank must be positive (got ", r, ")");
  }
  if (!(o.target_recall > 0 && o.target_recall <= 1)) {
    fail("predictor training: target recall must be in (0, 1] (got ", o.target_recall, ")");
  }
  if (o.epochs <= 0 || o.batch <= 0 || o.n_threads <= 0) {
    fail("predictor training: epochs, batch and threads must be positive (got ", o.epochs, ", ",
         o.batch, ", ", o.n_threads, ")");
  }
  if (!(o.validation >= 0 && o.validation <= 0.9)) {
    fail("predictor training: validation share must be in [0, 0.9] (got ", o.validation, ")");
  }
  if (!(o.learning_rate > 0) || !(o.pos_weight >= 0) || !(o.bytes_per_neuron >= 0) ||
      !(o.bytes_per_rank >= 0)) {
    fail("predictor training: learning rate must be positive, weights and byte costs >= 0");
  }
}

void check_predictor(const TrainedPredictor& p, const PredictorSamples& s) {
  if (p.rank <= 0 || static_cast<int64_t>(p.fc1.size()) != p.rank * s.n_embd ||
      static_cast<int64_t>(p.fc2.size()) != p.rank * s.n_ff) {
    fail("predictor of rank ", p.rank, " (fc1 ", p.fc1.size(), ", fc2 ", p.fc2.size(),
         " values) does not match samples with n_embd ", s.n_embd, ", n_ff ", s.n_ff);
  }
}

// Misses cost wrong outputs and false alarms only bandwidth, so positives weigh more; the square
// root of the class ratio leans towards recall without letting rare neurons swamp the loss.
float auto_pos_weight(const PredictorSamples& s, int64_t n_train) {
  int64_t positives = 0;
  for (int64_t i = 0; i < n_train * s.n_ff; ++i) positives += s.fired[i];
  if (positives == 0) return 1.0f;
  const double rate = static_cast<double>(positives) / static_cast<double>(n_train * s.n_ff);
  return static_cast<float>(std::clamp(std::sqrt((1 - rate) / rate), 1.0, kMaxAutoPosWeight));
}

// The runtime sees raw residual-stream inputs whose features differ in scale by orders of
// magnitude; training on x / rms(x) and folding 1 / rms into fc1 keeps Adam's steps balanced.
std::vector<float> input_scale(const PredictorSamples& s, int64_t n_train) {
  std::vector<double> sum(s.n_embd, 0.0);
  for (int64_t i = 0; i < n_train; ++i) {
    for (int64_t k = 0; k < s.n_embd; ++k)
      sum[k] += static_cast<double>(s.x[i * s.n_embd + k]) * s.x[i * s.n_embd + k];
  }
  std::vector<float> scale(s.n_embd, 1.0f);
  for (int64_t k = 0; k < s.n_embd; ++k) {
    const double rms = std::sqrt(sum[k] / static_cast<double>(n_train));
    if (rms > 0) scale[k] = static_cast<float>(1.0 / rms);
  }
  return scale;
}

TrainedPredictor to_predictor(const train::Network& net, const std::vector<float>& scale) {
  TrainedPredictor p;
  p.rank = net.rank;
  p.fc1.resize(net.rank * net.n_embd);
  p.fc2.resize(net.n_ff * net.rank);
  for (int64_t k = 0; k < net.n_embd; ++k) {
    for (int64_t r = 0; r < net.rank; ++r) {
      p.fc1[r * net.n_embd + k] = net.w1t[k * net.rank + r] * scale[k];
    }
  }
  train::transpose(net.w2t.data(), net.rank, net.n_ff, p.fc2.data());
  return p;
}

// The largest threshold keeping at least `target` of the fired neurons of samples [begin, end);
// false when none fired there.
bool choose_threshold(cpu::ThreadPool& pool, const TrainedPredictor& p, const PredictorSamples& s,
                      int64_t begin, int64_t end, double target, float& threshold) {
  std::vector<float> fired_scores;
  float max_score = -std::numeric_limits<float>::infinity();
  train::score_samples(pool, p, s, begin, end,
                       [&](const float* score, const uint8_t* fired, int64_t rows) {
                         for (int64_t i = 0; i < rows * s.n_ff; ++i) {
                           if (fired[i]) fired_scores.push_back(score[i]);
                           max_score = std::max(max_score, score[i]);
                         }
                       });
  if (fired_scores.empty()) {
    // Nothing fired: predict nothing.
    threshold = std::nextafter(max_score, std::numeric_limits<float>::infinity());
    return false;
  }
  const auto count = static_cast<int64_t>(fired_scores.size());
  // The slack keeps 0.95 * 100 from rounding up to 96 needed hits.
  const int64_t keep = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(target * static_cast<double>(count) - 1e-9)), 1, count);
  std::nth_element(fired_scores.begin(), fired_scores.begin() + (keep - 1), fired_scores.end(),
                   std::greater<float>());
  threshold = fired_scores[keep - 1];
  return true;
}

PredictorQuality measure(cpu::ThreadPool& pool, const TrainedPredictor& p,
                         const PredictorSamples& s, int64_t begin, int64_t end) {
  int64_t hits = 0, predicted = 0, fired_count = 0;
  train::score_samples(pool, p, s, begin, end,
                       [&](const float* score, const uint8_t* fired, int64_t rows) {
                         for (int64_t i = 0; i < rows * s.n_ff; ++i) {
                           const bool active = score[i] >= p.threshold;
                           predicted += active;
                           fired_count += fired[i];
                           hits += active && fired[i];
                         }
                       });
  const auto total = static_cast<double>((end - begin) * s.n_ff);
  PredictorQuality q;
  q.recall = fired_count > 0 ? static_cast<double>(hits) / static_cast<double>(fired_count) : 1.0;
  q.precision = predicted > 0 ? static_cast<double>(hits) / static_cast<double>(predicted) : 1.0;
  q.predicted_sparsity = 1.0 - static_cast<double>(predicted) / total;
  q.true_sparsity = 1.0 - static_cast<double>(fired_count) / total;
  return q;
}

}  // namespace

TrainedPredictor train_predictor(
    const PredictorSamples& samples, const PredictorTrainOptions& o,
    const std::function<void(int64_t rank, int epoch, int epochs, float loss)>& progress) {
  check_samples(samples);
  check_options(o);
  const int64_t n = samples.size();
  if (n < kMinSamples) {
    fail("predictor training: ", n, " samples is too few (at least ", kMinSamples, ")");
  }
  const int64_t n_val =
      o.validation > 0 ? std::max<int64_t>(1, std::llround(static_cast<double>(n) * o.validation))
                       : 0;
  const int64_t n_train = n - n_val;
  // Without a validation split the threshold is fitted on the training samples.
  const int64_t val_begin = n_val > 0 ? n_train : 0;

  train::FitSettings fit;
  fit.n_train = n_train;
  fit.pos_weight = o.pos_weight > 0 ? o.pos_weight : auto_pos_weight(samples, n_train);
  fit.input_scale = input_scale(samples, n_train);

  std::vector<int64_t> ranks = o.ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());

  cpu::ThreadPool pool(o.n_threads);
  TrainedPredictor best;
  std::vector<PredictorCandidate> candidates;
  bool best_reaches = false;
  double best_bytes = 0;
  for (int64_t rank : ranks) {
    std::vector<float> loss;
    const train::Network net = train::fit_rank(pool, samples, o, fit, rank, loss, progress);
    if (!std::isfinite(loss.back())) {
      fail("predictor training diverged at rank ", rank, " (loss ", loss.back(),
           "); lower the learning rate");
    }
    TrainedPredictor p = to_predictor(net, fit.input_scale);
    p.loss = std::move(loss);
    p.pos_weight = fit.pos_weight;
    // A split where nothing fired says nothing about recall: fall back to every sample.
    if (!choose_threshold(pool, p, samples, val_begin, n, o.target_recall, p.threshold)) {
      choose_threshold(pool, p, samples, 0, n, o.target_recall, p.threshold);
    }
    p.validation = measure(pool, p, samples, val_begin, n);

    PredictorCandidate c;
    c.rank = rank;
    c.threshold = p.threshold;
    c.validation = p.validation;
    c.bytes_per_token = static_cast<double>(rank) * o.bytes_per_rank +
                        (1.0 - p.validation.predicted_sparsity) *
                            static_cast<double>(samples.n_ff) * o.bytes_per_neuron;
    c.final_loss = p.loss.back();
    // Widths are tried smallest first, so a strict comparison breaks ties towards smaller ones.
    const bool reaches = c.validation.recall >= o.target_recall;
    const bool better = candidates.empty() || (reaches && !best_reaches) ||
                        (reaches == best_reaches && c.bytes_per_token < best_bytes);
    candidates.push_back(c);
    if (better) {
      best_reaches = reaches;
      best_bytes = c.bytes_per_token;
    }
    if (better) best = std::move(p);
  }
  best.candidates = std::move(candidates);
  return best;
}

PredictorQuality evaluate_predictor(const TrainedPredictor& p, const PredictorSamples& samples) {
  check_samples(samples);
  check_predictor(p, samples);
  cpu::ThreadPool pool(1);
  return measure(pool, p, samples, 0, samples.size());
}

void predictor_scores(const TrainedPredictor& p, const float* x, float* score) {
  if (p.rank <= 0 || p.fc1.empty() || p.fc2.empty()) fail("predictor_scores: empty predictor");
  const int64_t n_embd = static_cast<int64_t>(p.fc1.size()) / p.rank;
  const int64_t n_ff = static_cast<int64_t>(p.fc2.size()) / p.rank;
  std::vector<float> hidden(p.rank);  // [rank]
  for (int64_t r = 0; r < p.rank; ++r) {
    float h = 0;
    for (int64_t k = 0; k < n_embd; ++k) h += p.fc1[r * n_embd + k] * x[k];
    hidden[r] = std::max(h, 0.0f);
  }
  for (int64_t i = 0; i < n_ff; ++i) {
    float s = 0;
    for (int64_t r = 0; r < p.rank; ++r) s += p.fc2[i * p.rank + r] * hidden[r];
    score[i] = s;
  }
}

namespace train {

void score_samples(cpu::ThreadPool& pool, const TrainedPredictor& p, const PredictorSamples& s,
                   int64_t begin, int64_t end,
                   const std::function<void(const float*, const uint8_t*, int64_t)>& visit) {
  constexpr int64_t kBlock = 256;
  const int64_t n_embd = s.n_embd, n_ff = s.n_ff, rank = p.rank;
  std::vector<float> w1t(n_embd * rank), w2t(rank * n_ff);  // [n_embd, rank], [rank, n_ff]
  transpose(p.fc1.data(), rank, n_embd, w1t.data());
  transpose(p.fc2.data(), n_ff, rank, w2t.data());
  std::vector<float> hidden(kBlock * rank), score(kBlock * n_ff);  // [block, rank], [block, n_ff]
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t rows = std::min(kBlock, end - b0);
    forward(pool, w1t.data(), w2t.data(), n_embd, rank, n_ff, s.x.data() + b0 * n_embd, rows,
            hidden.data(), score.data());
    visit(score.data(), s.fired.data() + b0 * n_ff, rows);
  }
}

}  // namespace train
}  // namespace hearth::sparse
