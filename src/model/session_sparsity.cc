#include "model/session_sparsity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/model_impl.h"
#include "sparse/ffn.h"

namespace hearth {

namespace {

SparseMode resolve_mode(const SessionOptions& o, const Model& m) {
  const SparseMode requested = o.sparse;
  if (requested == SparseMode::Auto) return m.impl().auto_sparse_mode();
  if (requested == SparseMode::Predictor && !m.has_predictors()) {
    fail(m.path(),
         ": --sparse predictor needs predictors (blk.N.fc1/fc2), which this model does "
         "not have; make them with hearth calibrate, or use --sparse oracle");
  }
  if (requested == SparseMode::Threshold && !m.has_thresholds() && o.thresholds.empty()) {
    fail(m.path(),
         ": --sparse threshold needs per-layer thresholds (hearth.*_thresholds), "
         "which this model does not have; make them with hearth calibrate --sparsity F");
  }
  if (!o.thresholds.empty() && static_cast<int64_t>(o.thresholds.size()) != m.config().n_layer) {
    fail("the session got thresholds for ", o.thresholds.size(), " layers; the model has ",
         m.config().n_layer);
  }
  return requested;
}

// Whether every input-major copy holds float values: those products give the same bits through
// the copy and through the file's matrix (lane_matvec), so prompts may take the file's matrices
// at full speed and still compute what decode steps do.
bool float_copies(const sparse::InputMajor& im) {
  const auto is_float = [](const Matrix& m) {
    return !m.present() || dtype_block_size(m.type) == 1;
  };
  return std::all_of(im.layers.begin(), im.layers.end(), [&](const InputMajorLayer& l) {
    return is_float(l.wq_t) && is_float(l.wk_t) && is_float(l.wv_t) && is_float(l.wqkv_t) &&
           is_float(l.wo_t) && is_float(l.gate_t) && is_float(l.up_t);
  });
}

}  // namespace

SessionSparsity::SessionSparsity(const SessionOptions& o, const Model& m)
    : mode_(resolve_mode(o, m)), audit_(o.sparse_audit && mode_ == SparseMode::Predictor) {
  const ModelConfig& c = m.config();
  if (mode_ == SparseMode::Threshold) {
    thresholds_ = o.thresholds.empty() ? c.thresholds : o.thresholds;
  }
  // Model-wide thresholds read input-major copies on models at least input_major_min_width wide.
  const bool input_major = model_wide(thresholds_) && c.n_embd >= o.input_major_min_width;
  if (input_major) input_major_ = &m.impl().input_major();
  // Sparse prompts through quantized copies cost prompt speed, so there prompts are dense unless
  // asked for; float copies cost nothing (docs/design-notes.md, "Batch invariance").
  sparse_prompt_ = o.sparse_prompt ? *o.sparse_prompt : !input_major || float_copies(*input_major_);
}

int64_t SessionSparsity::input_major_rows(int32_t n_batch) const {
  return input_major_ ? std::min<int64_t>(n_batch, input_sparse_rows()) : 0;
}

float SessionSparsity::ffn_threshold(const ModelConfig& c, size_t il, float override) const {
  switch (mode_) {
    case SparseMode::Predictor:
      if (!std::isnan(override)) return override;
      return c.predictor_thresholds.empty() ? c.sparse_threshold : c.predictor_thresholds[il];
    case SparseMode::Threshold:
      return thresholds_[il].gate;
    default:
      return 0.0f;
  }
}

int64_t SessionSparsity::input_sparse_rows() const {
  if (mode_ != SparseMode::Threshold) return 0;
  return sparse_prompt_ ? std::numeric_limits<int64_t>::max() : sparse::kMaxSparseBatch;
}

AttentionThresholds SessionSparsity::attention(size_t il, SparseStats& stats) const {
  if (thresholds_.empty()) return {};
  AttentionThresholds th{thresholds_[il].attn_in, thresholds_[il].attn_out,
                         static_cast<int32_t>(il), &stats};
  // Sparse rows read the input-major copies: a decode step's, and a prompt's when prompts are
  // sparse (so that every token gets what it gets alone); attention_block tells them apart.
  if (input_major_) th.input_major = &input_major_->layers[il];
  return th;
}

}  // namespace hearth
