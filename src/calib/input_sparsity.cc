#include "calib/input_sparsity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "calib/heldout_divergence.h"
#include "calib/windows.h"
#include "core/error.h"
#include "hearth/session.h"
#include "model/model_internals.h"
#include "sparse/activation_profile.h"
#include "sparse/neuron_major.h"

namespace hearth::calib {
namespace {

// Models with at most this many thresholded weights get one group per layer by default; larger
// ones one group in all, so that the search stays a few hundred evaluations.
constexpr int64_t kPerLayerSearchWeights = 100'000'000;
// After the search: a layer whose held-out sparsity is further than this from the target has its
// shares rescaled, for at most kCorrectionRounds rounds.
constexpr double kAchievedTolerance = 0.005;
constexpr int kCorrectionRounds = 3;

// Keeps a histogram of |x| per layer and input kind, from the products a dense session reports
// by tensor name (blk.N.<name>.weight).
class InputProfiler : public MatmulObserver {
 public:
  explicit InputProfiler(int64_t n_layer)
      : hist_(static_cast<size_t>(n_layer) * kInputKinds) {}

  void observe(const std::string& name, int64_t n, const float* x, int64_t cols) override {
    int layer = -1, used = 0;
    if (std::sscanf(name.c_str(), "blk.%d.%n", &layer, &used) != 1 || used == 0) return;
    const std::string rest = name.substr(static_cast<size_t>(used));
    int kind = -1;
    if (rest == "attn_q.weight" || rest == "attn_qkv.weight") kind = kAttnIn;
    if (rest == "attn_output.weight") kind = kAttnOut;
    if (rest == "ffn_up.weight") kind = kFfnIn;  // gate's input is the same rows
    if (rest == "ffn_down.weight") kind = kDownIn;
    if (kind < 0 || layer < 0 || static_cast<size_t>(layer) * kInputKinds >= hist_.size()) return;
    at(layer, kind).add(x, n * cols);
  }

  sparse::MagnitudeHistogram& at(int64_t layer, int kind) {
    return hist_[static_cast<size_t>(layer) * kInputKinds + static_cast<size_t>(kind)];
  }

 private:
  std::vector<sparse::MagnitudeHistogram> hist_;  // [n_layer, kInputKinds]
};

// The loss and per-layer sparsity of the thresholds found so far.
void measure_result(HeldoutDivergence& eval, InputAllocation& a) {
  HeldoutDivergence::Result r = eval.measure(a.thresholds);
  a.sparse_nll = r.nll;
  a.divergence = r.kl;
  a.achieved = std::move(r.achieved);
}

void check_options(const InputSparsityOptions& o, int64_t n_layer) {
  if (!(o.sparsity > 0 && o.sparsity < 1)) {
    fail("--sparsity must be between 0 and 1 (got ", o.sparsity, ")");
  }
  if (!(o.max_share > 0 && o.max_share < 1) || o.sparsity > o.max_share) {
    fail("--sparsity ", o.sparsity, " is more than any input may skip (", o.max_share, ")");
  }
  if (!(o.step > 0 && o.step <= o.max_share)) fail("the greedy step must be in (0, max share]");
  if (o.layer_groups < 0 || o.layer_groups > n_layer) {
    fail("--layer-groups must be between 1 and the model's ", n_layer, " layers (0: auto)");
  }
}

// One greedy step's candidate: input `kind` of the group's layers from its share to `share`.
struct Candidate {
  int kind = -1;
  double share = 0;
  double skipped = 0;  // weights per layer the step adds to the skipped ones
  double saved = 0;    // what the step saves: decode time (Allocate::Speed) or weights
};

// The search over one group of layers [first, last): raises the group's shares until its
// weighted share of skipped weights reaches the target.
class GroupSearch {
 public:
  GroupSearch(InputProfiler& profile, HeldoutDivergence& eval, const InputShape& shape,
              const Weights& weights, const InputSparsityOptions& o, InputAllocation& a)
      : profile_(profile), eval_(eval), shape_(shape), weights_(weights), o_(o), a_(a) {}

  double run(int64_t first, int64_t last, double divergence) {
    std::array<double, kInputKinds> share{};
    double skipped = 0;  // weights per token, per layer of the group
    const double target = o_.sparsity * static_cast<double>(shape_.total_weights());
    while (skipped < target * (1 - 1e-9)) {
      std::vector<Candidate> candidates;
      for (int k = 0; k < kInputKinds; ++k) {
        const Candidate c = next_step(first, last, k, share[k], target - skipped);
        if (c.skipped > 0) candidates.push_back(c);
      }
      if (candidates.empty()) fail("the inputs cannot skip ", o_.sparsity, " of the weights");
      // Steps that save nothing (a copy still slower than the file's matrix) are taken only when
      // no other step is left, then by the weights they skip.
      const bool any_saves =
          std::any_of(candidates.begin(), candidates.end(), [](auto& c) { return c.saved > 0; });
      const Candidate* best = nullptr;
      double best_cost = 0, best_divergence = 0;
      for (const Candidate& c : candidates) {
        if (any_saves && c.saved <= 0) continue;
        std::vector<LayerThresholds> trial = a_.thresholds;
        set_group(trial, first, last, c.kind, c.share);
        const double d = eval_.measure(trial).kl;
        const double cost = (d - divergence) / (any_saves ? c.saved : c.skipped);
        if (!best || cost < best_cost) best = &c, best_cost = cost, best_divergence = d;
      }
      share[best->kind] = best->share;
      skipped += best->skipped;
      set_group(a_.thresholds, first, last, best->kind, best->share);
      divergence = best_divergence;
      say(first, last, share, divergence);
    }
    for (int64_t l = first; l < last; ++l) a_.shares[static_cast<size_t>(l)] = share;
    return divergence;
  }

 private:
  // Input k's next step from `share`, skipping at most `left` weights per layer: one step of
  // o.step; for Allocate::Speed, where that saves no time (a copy is slower than the file's
  // matrix above its crossover), as many steps as it takes to save some.
  Candidate next_step(int64_t first, int64_t last, int k, double share, double left) const {
    const auto w = static_cast<double>(shape_.weights(k));
    const double top = std::min(o_.max_share, share + left / w);
    const bool by_time = o_.allocate == Allocate::Speed;
    const double now = by_time ? time(first, last, k, share) : 0;
    Candidate c;
    c.kind = k;
    for (int n = 1; share + (n - 1) * o_.step < top - 1e-12; ++n) {
      c.share = std::min(share + n * o_.step, top);
      c.skipped = (c.share - share) * w;
      c.saved = by_time ? now - time(first, last, k, c.share) : c.skipped;
      if (c.saved > 0 || !by_time) break;
    }
    return c;
  }

  // A decode step's time over the matrices input k feeds in the group's layers, at `share`.
  double time(int64_t first, int64_t last, int k, double share) const {
    double t = 0;
    for (int64_t l = first; l < last; ++l) {
      t += sparse::input_read(weights_.layers[static_cast<size_t>(l)], static_cast<InputKind>(k),
                              1.0 - share)
               .time;
    }
    return t;
  }

  void set_group(std::vector<LayerThresholds>& t, int64_t first, int64_t last, int kind,
                 double share) {
    for (int64_t l = first; l < last; ++l) {
      threshold_of(t[static_cast<size_t>(l)], kind) = profile_.at(l, kind).quantile(share);
    }
  }

  void say(int64_t first, int64_t last, const std::array<double, kInputKinds>& share,
           double divergence) const {
    if (!o_.log) return;
    std::string line =
        last - first == 1 ? str_cat("layer ", first) : str_cat("layers ", first, "-", last - 1);
    for (int k = 0; k < kInputKinds; ++k) line += str_cat(" ", input_kind_name(k), " ", share[k]);
    o_.log(str_cat(line, ": held-out divergence ", divergence));
  }

  InputProfiler& profile_;
  HeldoutDivergence& eval_;
  const InputShape& shape_;
  const Weights& weights_;
  const InputSparsityOptions& o_;
  InputAllocation& a_;
};

}  // namespace

const char* input_kind_name(int kind) {
  static constexpr const char* kNames[kInputKinds] = {"attn_in", "attn_out", "ffn_in", "down_in"};
  return kind >= 0 && kind < kInputKinds ? kNames[kind] : "?";
}

float& threshold_of(LayerThresholds& t, int kind) {
  switch (kind) {
    case kAttnIn: return t.attn_in;
    case kAttnOut: return t.attn_out;
    case kFfnIn: return t.ffn_in;
    default: return t.down;
  }
}

int64_t InputShape::total_weights() const {
  int64_t total = 0;
  for (int k = 0; k < kInputKinds; ++k) total += weights(k);
  return total;
}

InputShape input_shape(const ModelConfig& c) {
  const int64_t q_dim = c.n_head * c.head_dim;
  InputShape s;
  s.elements = {c.n_embd, q_dim, c.n_embd, c.n_ff};
  s.fan_out = {q_dim + 2 * c.n_embd_kv(), c.n_embd, c.n_ff * (c.ffn_gated ? 2 : 1), c.n_embd};
  return s;
}

InputAllocation allocate_input_sparsity(const std::shared_ptr<const Model>& model,
                                        std::span<const int32_t> train,
                                        std::span<const int32_t> heldout,
                                        const InputSparsityOptions& o) {
  const ModelConfig& c = model->config();
  check_options(o, c.n_layer);
  const InputShape shape = input_shape(c);

  InputProfiler profile(c.n_layer);
  {
    SessionOptions so;
    so.n_threads = o.n_threads;
    so.sparse = SparseMode::Dense;
    so.matmul_observer = &profile;
    run_windows(model, train, so, o.window, o.log, "profile (input magnitudes)");
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    for (int k = 0; k < kInputKinds; ++k) {
      if (profile.at(l, k).count() == 0) {
        fail(model->path(), ": layer ", l, "'s ", input_kind_name(k),
             " product was never seen; model-wide thresholds need the row-major matrices "
             "(attn_q or attn_qkv, attn_output, ffn_up, ffn_down)");
      }
    }
  }

  InputAllocation a;
  a.thresholds.assign(static_cast<size_t>(c.n_layer), LayerThresholds{});
  a.shares.assign(static_cast<size_t>(c.n_layer), {});
  a.layer_groups = o.layer_groups > 0 ? o.layer_groups
                   : shape.total_weights() * c.n_layer <= kPerLayerSearchWeights ? c.n_layer
                                                                                 : 1;
  // Decode steps of a model narrower than this read no input-major copies: its thresholds save
  // no time, so the search weighs the weights they skip.
  InputSparsityOptions so = o;
  if (c.n_embd < SessionOptions{}.input_major_min_width) so.allocate = Allocate::Weights;
  a.allocate = so.allocate;
  HeldoutDivergence eval(model, heldout, o.window, o.n_threads);
  a.dense_nll = eval.dense().nll;
  double divergence = 0;  // from the dense model
  GroupSearch search(profile, eval, shape, model_weights(*model), so, a);
  for (int64_t g = 0; g < a.layer_groups; ++g) {
    const int64_t first = c.n_layer * g / a.layer_groups;
    const int64_t last = c.n_layer * (g + 1) / a.layer_groups;
    divergence = search.run(first, last, divergence);
  }
  measure_result(eval, a);
  // The thresholds come from the dense model's activations; once earlier layers skip inputs, a
  // layer's own inputs shift and it may skip more or less than allocated. Rescale each layer's
  // shares by target / achieved and measure again, a few times at most.
  for (int round = 0; round < kCorrectionRounds; ++round) {
    bool off = false;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const double got = a.achieved[static_cast<size_t>(l)];
      if (std::fabs(got - o.sparsity) <= kAchievedTolerance || got <= 0) continue;
      off = true;
      for (int k = 0; k < kInputKinds; ++k) {
        double& share = a.shares[static_cast<size_t>(l)][k];
        share = std::min(o.max_share, share * o.sparsity / got);
        threshold_of(a.thresholds[static_cast<size_t>(l)], k) = profile.at(l, k).quantile(share);
      }
    }
    if (!off) break;
    measure_result(eval, a);
  }
  a.evaluations = eval.evaluations();
  return a;
}

}  // namespace hearth::calib
