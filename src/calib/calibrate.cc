#include "calib/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "calib/input_sparsity.h"
#include "calib/windows.h"
#include "core/error.h"
#include "core/fp16.h"
#include "hearth/session.h"
#include "model/model_internals.h"
#include "sparse/activation_profile.h"

namespace hearth::calib {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMinTrainTokens = 256;   // fewer and the statistics mean nothing
constexpr int64_t kMinHeldoutTokens = 64;
constexpr double kSampleBudgetBytes = 1024.0 * 1024 * 1024;
// The gate stage's share of the requested sparsity: |act(gate)| alone is a poor guide to which
// neurons matter, so it skips only this share and |act(gate) · up| picks the rest, which costs
// far less perplexity than the gate alone (docs/benchmarks.md).
constexpr double kGateShare = 0.4;

void say(const CalibrateOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

// Runs `tokens` through a dense session with the profiler attached (run_windows).
void profile_tokens(const std::shared_ptr<const Model>& model, std::span<const int32_t> tokens,
                    sparse::ActivationProfiler& profiler, const CalibrateOptions& o,
                    const std::string& label) {
  SessionOptions so;
  so.n_threads = o.n_threads;
  so.sparse = SparseMode::Dense;
  so.ffn_observer = &profiler;
  run_windows(model, tokens, so, o.window, o.log, label);
}

float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// The bytes one active neuron costs a decode step: its rows of up and gate and its row of the
// neuron-major down (the sparse path's reads).
double bytes_per_neuron(const Model& m) {
  const LayerWeights& l = model_weights(m).layers.front();
  double b = static_cast<double>(row_bytes(l.ffn_up.type, l.ffn_up.cols));
  if (l.ffn_gate.present()) b += static_cast<double>(row_bytes(l.ffn_gate.type, l.ffn_gate.cols));
  const Matrix& down = l.ffn_down_t.present() ? l.ffn_down_t : l.ffn_down;
  b += static_cast<double>(down.bytes()) / static_cast<double>(m.config().n_ff);
  return b;
}

CalibKind resolve_kind(const Model& m, const CalibrateOptions& o) {
  const bool relu = m.config().ffn_act == FfnActivation::Relu ||
                    m.config().ffn_act == FfnActivation::Relu2;
  const bool has_sparsity = !std::isnan(o.sparsity);
  if (has_sparsity && !(o.sparsity > 0 && o.sparsity < 1)) {
    fail("--sparsity must be between 0 and 1 (got ", o.sparsity, ")");
  }
  CalibKind k = o.kind;
  if (k == CalibKind::Auto) k = has_sparsity ? CalibKind::InputThresholds : CalibKind::Predictors;
  const bool thresholds = k == CalibKind::Thresholds || k == CalibKind::InputThresholds;
  if (thresholds && !has_sparsity) fail("thresholds need --sparsity F");
  if (!thresholds && !relu) {
    fail("this model's FFN activation is ", to_string(m.config().ffn_act),
         ", whose neurons are never exactly zero, so there is nothing for predictors to learn; "
         "give --sparsity F for per-layer magnitude thresholds");
  }
  return k;
}

struct TokenSplit {
  std::vector<int32_t> train, heldout;
};

TokenSplit split_tokens(const Model& m, const CalibrateOptions& o) {
  if (o.window < 8) fail("the profiling window must be at least 8 tokens (got ", o.window, ")");
  TokenSplit s;
  std::vector<int32_t> all = tokenize_text(m, o.text, "calibration text");
  if (!o.heldout_text.empty()) {
    s.heldout = tokenize_text(m, o.heldout_text, "held-out text");
    s.train = std::move(all);
  } else {
    if (!(o.heldout_share > 0 && o.heldout_share < 1)) fail("the held-out share must be in (0, 1)");
    const auto cut = static_cast<size_t>(std::llround(all.size() * (1.0 - o.heldout_share)));
    s.train.assign(all.begin(), all.begin() + static_cast<ptrdiff_t>(cut));
    s.heldout.assign(all.begin() + static_cast<ptrdiff_t>(cut), all.end());
  }
  if (o.max_tokens > 0 && static_cast<int64_t>(s.train.size()) > o.max_tokens) {
    s.train.resize(static_cast<size_t>(o.max_tokens));
  }
  if (o.max_heldout > 0 && static_cast<int64_t>(s.heldout.size()) > o.max_heldout) {
    s.heldout.resize(static_cast<size_t>(o.max_heldout));
  }
  if (static_cast<int64_t>(s.train.size()) < kMinTrainTokens ||
      static_cast<int64_t>(s.heldout.size()) < kMinHeldoutTokens) {
    fail("the text is too short: calibration needs at least ", kMinTrainTokens,
         " tokens to profile and ", kMinHeldoutTokens, " held-out tokens (got ", s.train.size(),
         " and ", s.heldout.size(), ")");
  }
  return s;
}

int64_t sample_budget(const ModelConfig& c, const CalibrateOptions& o) {
  if (o.max_samples < 16) fail("--max-samples must be at least 16 (got ", o.max_samples, ")");
  const double per = static_cast<double>(c.n_layer) * (c.n_embd * sizeof(float) + c.n_ff);
  return std::min(o.max_samples, std::max<int64_t>(1024, static_cast<int64_t>(kSampleBudgetBytes / per)));
}

// What predictor training needs, from a dense pass over the calibration and held-out tokens.
ProfileData profile_for_predictors(const std::shared_ptr<const Model>& model,
                                   const TokenSplit& split, const CalibrateOptions& o) {
  const ModelConfig& c = model->config();
  sparse::ProfileOptions po = sparse::ProfileOptions{};
  po.max_samples = sample_budget(c, o);
  po.seed = o.seed;
  sparse::ActivationProfiler train(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.train, train, o, "profile");
  po.max_samples = static_cast<int64_t>(split.heldout.size()) + 1;
  sparse::ActivationProfiler held(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.heldout, held, o, "held-out");
  ProfileData d;
  d.tokens = static_cast<int64_t>(train.tokens());
  d.heldout_tokens = static_cast<int64_t>(held.tokens());
  for (int64_t il = 0; il < c.n_layer; ++il) {
    d.freq.push_back(train.frequencies(il));
    d.sparsity.push_back(train.sparsity(il));
    d.train.push_back(train.samples(il));
    d.heldout.push_back(held.samples(il));
  }
  return d;
}

void train_predictors(const std::shared_ptr<const Model>& model, const ProfileData& d,
                      const CalibrateOptions& o, CalibrationResult& r) {
  const ModelConfig& c = model->config();

  sparse::PredictorTrainOptions to;
  to.ranks = o.ranks.empty() ? default_ranks(c.n_embd) : o.ranks;
  // Half the allowed misses as a safety margin: the threshold is picked on validation samples of
  // the calibration text, and other text should reach the target too.
  to.target_recall = 1.0 - (1.0 - o.target_recall) * 0.5;
  to.bytes_per_neuron = bytes_per_neuron(*model);
  to.bytes_per_rank = static_cast<double>(c.n_embd + c.n_ff) * 2;  // written as F16
  to.epochs = o.epochs;
  to.seed = o.seed;
  to.n_threads = o.n_threads;
  const auto start = Clock::now();
  for (int64_t il = 0; il < c.n_layer; ++il) {
    auto last = Clock::now();
    sparse::TrainedPredictor p = sparse::train_predictor(
        d.train[static_cast<size_t>(il)], to, [&](int64_t rank, int epoch, int epochs, float loss) {
          const auto now = Clock::now();
          if (epoch == epochs || now - last > std::chrono::seconds(2)) {
            last = now;
            say(o, cat("train layer ", il + 1, "/", c.n_layer, " width ", rank, ": epoch ", epoch,
                       "/", epochs, " loss ", loss));
          }
        });
    // The file stores the predictor in f16; measure what the runtime will compute.
    for (float& v : p.fc1) v = round_f16(v);
    for (float& v : p.fc2) v = round_f16(v);
    const sparse::PredictorQuality q =
        sparse::evaluate_predictor(p, d.heldout[static_cast<size_t>(il)]);
    sparse::CalibLayerReport lr;
    lr.freq = d.freq[static_cast<size_t>(il)];
    lr.recall = q.recall;
    lr.precision = q.precision;
    lr.predicted_sparsity = q.predicted_sparsity;
    lr.true_sparsity = q.true_sparsity;
    lr.predictor_rank = p.rank;
    lr.threshold = p.threshold;
    lr.loss = p.loss;
    r.report.layers.push_back(std::move(lr));
    say(o, cat("layer ", il + 1, "/", c.n_layer, ": width ", p.rank, ", threshold ", p.threshold,
               ", held-out recall ", q.recall, ", precision ", q.precision,
               ", predicted sparsity ", q.predicted_sparsity, " (true ", q.true_sparsity, "), ",
               static_cast<int64_t>(std::chrono::duration<double>(Clock::now() - start).count() /
                                    static_cast<double>(il + 1) * static_cast<double>(c.n_layer - il - 1)),
               " s left"));
    r.predictors.push_back(LayerPredictor{p.rank, std::move(p.fc1), std::move(p.fc2), p.threshold});
  }
  r.report.tokens = d.tokens;
  r.report.target = o.target_recall;
  r.heldout_tokens = d.heldout_tokens;
}

// Two stages per layer (SparseMode::Threshold): neurons whose |act(gate)| is small skip up and
// down (share gate_share of them), then those whose |act(gate) · up| is small skip down too, up
// to the requested sparsity. The second rule is TEAL's for the down projection's input and
// costs little accuracy; the first saves the up rows but costs more, so it takes a smaller share.
void choose_thresholds(const std::shared_ptr<const Model>& model, const TokenSplit& split,
                       const CalibrateOptions& o, CalibrationResult& r) {
  const ModelConfig& c = model->config();
  const double gate_share = std::isnan(o.gate_sparsity) ? kGateShare * o.sparsity : o.gate_sparsity;
  if (!(gate_share >= 0 && gate_share <= o.sparsity)) {
    fail("--gate-sparsity must be between 0 and --sparsity (got ", gate_share, ")");
  }
  sparse::ProfileOptions po = sparse::ProfileOptions{};
  po.histograms = true;
  sparse::ActivationProfiler gate(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.train, gate, o, "profile (gate magnitudes)");
  r.thresholds.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const float t = gate_share > 0 ? gate.histogram(il).quantile(gate_share) : 0.0f;
    r.thresholds[static_cast<size_t>(il)].gate = t;
    po.thresholds.push_back(t);
  }
  sparse::ActivationProfiler down(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.train, down, o, "profile (down magnitudes)");
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const float t = down.down_histogram(il).quantile(o.sparsity);
    r.thresholds[static_cast<size_t>(il)].down = t;
    po.down_thresholds.push_back(t);
  }
  // Which neurons the thresholds keep, on the calibration and the held-out tokens.
  po.histograms = false;
  sparse::ActivationProfiler train(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.train, train, o, "profile (frequencies)");
  sparse::ActivationProfiler held(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.heldout, held, o, "held-out");
  for (int64_t il = 0; il < c.n_layer; ++il) {
    sparse::CalibLayerReport lr;
    lr.freq = train.frequencies(il);
    lr.true_sparsity = held.sparsity(il);
    lr.threshold = r.thresholds[static_cast<size_t>(il)].down;
    say(o, cat("layer ", il + 1, "/", c.n_layer, ": gate threshold ",
               r.thresholds[static_cast<size_t>(il)].gate, ", down threshold ", lr.threshold,
               ", held-out sparsity ", lr.true_sparsity));
    r.report.layers.push_back(std::move(lr));
  }
  r.report.tokens = static_cast<int64_t>(train.tokens());
  r.report.target = o.sparsity;
}

// Model-wide thresholds (calib/input_sparsity.h), then which neurons' down rows they keep on the
// held-out tokens (the report's and the file's firing frequencies).
void choose_input_thresholds(const std::shared_ptr<const Model>& model, const TokenSplit& split,
                             const CalibrateOptions& o, CalibrationResult& r) {
  const ModelConfig& c = model->config();
  if (o.search_tokens < kMinHeldoutTokens) {
    fail("the search needs at least ", kMinHeldoutTokens, " held-out tokens (got ",
         o.search_tokens, ")");
  }
  InputSparsityOptions io;
  io.sparsity = o.sparsity;
  io.window = o.window;
  io.layer_groups = o.layer_groups;
  io.allocate = o.allocate;
  io.n_threads = o.n_threads;
  io.log = o.log;
  const size_t n_search = std::min(split.heldout.size(), static_cast<size_t>(o.search_tokens));
  const InputAllocation a = allocate_input_sparsity(
      model, split.train, std::span(split.heldout).first(n_search), io);
  r.thresholds = a.thresholds;
  say(o, cat("held-out perplexity ", std::exp(a.dense_nll), " dense, ", std::exp(a.sparse_nll),
             " at ", o.sparsity, " input sparsity, KL from dense ", a.divergence, " (",
             a.evaluations, " evaluations, ", a.layer_groups, " layer groups, by ",
             a.allocate == Allocate::Speed ? "decode time saved" : "weights skipped", ")"));
  sparse::ProfileOptions po = sparse::ProfileOptions{};
  for (const LayerThresholds& t : a.thresholds) po.down_thresholds.push_back(t.down);
  sparse::ActivationProfiler held(c.n_layer, c.n_embd, c.n_ff, po);
  profile_tokens(model, split.heldout, held, o, "held-out (frequencies)");
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto l = static_cast<size_t>(il);
    sparse::CalibLayerReport lr;
    lr.freq = held.frequencies(il);
    lr.true_sparsity = a.achieved[l];
    lr.threshold = a.thresholds[l].down;
    lr.input_share.assign(a.shares[l].begin(), a.shares[l].end());
    r.report.layers.push_back(std::move(lr));
  }
  r.report.tokens = static_cast<int64_t>(split.train.size());
  r.report.target = o.sparsity;
}

// --stage profile: the statistics, plus the samples a later --stage train needs.
void profile_only(const std::shared_ptr<const Model>& model, const TokenSplit& split,
                  const CalibrateOptions& o, CalibrationResult& r) {
  r.profile = profile_for_predictors(model, split, o);
  for (size_t il = 0; il < r.profile.freq.size(); ++il) {
    sparse::CalibLayerReport lr;
    lr.freq = r.profile.freq[il];
    lr.true_sparsity = r.profile.sparsity[il];
    r.report.layers.push_back(std::move(lr));
  }
  r.report.tokens = r.profile.tokens;
  r.heldout_tokens = r.profile.heldout_tokens;
}

}  // namespace

std::vector<int64_t> default_ranks(int64_t n_embd) {
  std::vector<int64_t> r;
  // Tiny models get widths up to n_embd itself (still a small share of their FFN).
  const int64_t lo = std::max<int64_t>(8, n_embd / 64);
  const int64_t hi = std::min<int64_t>(1024, std::max<int64_t>(n_embd / 2, std::min<int64_t>(n_embd, 64)));
  for (int64_t w = 8; w <= std::max(hi, lo); w *= 2) {
    if (w >= lo) r.push_back(w);
  }
  return r;
}

namespace {

void check_options(const CalibrateOptions& o) {
  if (o.n_threads < 1) fail("the thread count must be at least 1");
  if (!(o.target_recall > 0 && o.target_recall <= 1)) {
    fail("--target-recall must be in (0, 1] (got ", o.target_recall, ")");
  }
  if (o.epochs < 1) fail("--epochs must be at least 1");
}

}  // namespace

std::vector<int32_t> training_tokens(const Model& model, const CalibrateOptions& o) {
  return split_tokens(model, o).train;
}

CalibrationResult calibrate(const std::shared_ptr<const Model>& model, const CalibrateOptions& o) {
  check_options(o);
  CalibrationResult r;
  r.kind = resolve_kind(*model, o);
  const TokenSplit split = split_tokens(*model, o);
  r.heldout_tokens = static_cast<int64_t>(split.heldout.size());
  const std::string& path = model->path();
  r.report.model = path.substr(path.find_last_of('/') + 1);
  say(o, cat("calibrating ", r.report.model, " on ", split.train.size(), " tokens (",
             split.heldout.size(), " held out)"));
  switch (r.kind) {
    case CalibKind::Predictors:
      r.report.kind = "predictors";
      train_predictors(model, profile_for_predictors(model, split, o), o, r);
      break;
    case CalibKind::Thresholds:
      r.report.kind = "thresholds";
      choose_thresholds(model, split, o, r);
      break;
    case CalibKind::InputThresholds:
      r.report.kind = "input thresholds";
      choose_input_thresholds(model, split, o, r);
      break;
    default:
      r.report.kind = "profile";
      profile_only(model, split, o, r);
  }
  return r;
}

CalibrationResult train_from_profile(const std::shared_ptr<const Model>& profile,
                                     const CalibrateOptions& o) {
  check_options(o);
  CalibrationResult r;
  r.kind = CalibKind::Predictors;
  r.report.kind = "predictors";
  const std::string& path = profile->path();
  r.report.model = path.substr(path.find_last_of('/') + 1);
  const ProfileData d = read_profile(*profile);
  say(o, cat("training on the profile in ", r.report.model, " (", d.tokens, " tokens, ",
             d.heldout_tokens, " held out)"));
  train_predictors(profile, d, o, r);
  return r;
}

}  // namespace hearth::calib
