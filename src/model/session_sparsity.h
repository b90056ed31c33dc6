// What a session's sparse mode decides, resolved once from its options and the model's file:
// the mode (never Auto), the per-layer thresholds, whether prompts are sparse, and which rows of a
// pass apply input thresholds. Internal to src/model/.
#pragma once

#include <cstdint>
#include <vector>

#include "hearth/model.h"
#include "hearth/session.h"
#include "ops/attention_block.h"
#include "sparse/neuron_major.h"

namespace hearth {

class SessionSparsity {
 public:
  SessionSparsity() = default;
  SessionSparsity(const SessionOptions& o, const Model& m);

  SparseMode mode() const { return mode_; }
  // Prompt tokens get their own masks, as decode steps do (SessionOptions::sparse_prompt).
  bool sparse_prompt() const { return sparse_prompt_; }
  bool audit() const { return audit_; }
  // Threshold mode: per layer, the options' or else the file's; other modes: empty.
  const std::vector<LayerThresholds>& thresholds() const { return thresholds_; }
  // The input-major copies that sparse rows read (model-wide thresholds on a wide enough model),
  // or null.
  const sparse::InputMajor* input_major() const { return input_major_; }
  // The most rows a pass sends through the input-major copies at once (0: it has none).
  int64_t input_major_rows(int32_t n_batch) const;

  // The threshold layer il's FFN decides with: the predictor's score threshold (`override`
  // unless NaN, else the file's per-layer or global one), or the gate magnitude one.
  float ffn_threshold(const ModelConfig& c, size_t il, float override) const;
  // Chunks of at most this many rows that are not dense prompts (PassLayout::Chunk::dense) apply
  // the input thresholds: as the FFN decides (sparse::FfnExecutor), decode-sized ones, or all
  // when prompts are sparse; 0 outside Threshold mode.
  int64_t input_sparse_rows() const;
  // Layer il's attention input thresholds (none outside Threshold mode).
  AttentionThresholds attention(size_t il, SparseStats& stats) const;

 private:
  SparseMode mode_ = SparseMode::Dense;
  std::vector<LayerThresholds> thresholds_;
  bool sparse_prompt_ = false;
  bool audit_ = false;
  const sparse::InputMajor* input_major_ = nullptr;
};

}  // namespace hearth
