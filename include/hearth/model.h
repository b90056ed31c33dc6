// A loaded model: immutable after load (config, mmapped weights, tokenizer), so any number of
// Sessions can share one Model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/types.h"

namespace hearth {

class Model {
 public:
  // Maps and validates the GGUF file. Throws hearth::Error with a clear message (file, key or
  // tensor named) on any problem: missing file, not GGUF, truncated, unsupported arch or type.
  // use_mmap = false reads the file into private memory instead of mapping it (--no-mmap).
  static std::shared_ptr<const Model> load(const std::string& path, bool use_mmap = true);
  ~Model();

  const ModelConfig& config() const;
  const std::string& path() const;
  // Total bytes of weight data that one decode step reads (all matrices once, embeddings excluded).
  uint64_t weight_bytes_per_token() const;
  uint64_t file_bytes() const;

  // Whether every FFN layer has a predictor (blk.N.fc1/fc2), so SparseMode::Predictor can run.
  bool has_predictors() const;
  // The predictor threshold stored in the file (hearth.sparse_threshold, else
  // powerinfer.sparse_threshold, else 0).
  float sparse_threshold() const;
  // Whether the file has calibrated per-layer gate thresholds (hearth.gate_thresholds), so
  // SparseMode::Threshold can run.
  bool has_gate_thresholds() const;
  // Whether the file is a PowerInfer model (magic PWRI).
  bool is_powerinfer() const;

  // Tokenizer.
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos, bool parse_special = false) const;
  std::string token_to_piece(int32_t id) const;
  int32_t bos() const;
  int32_t eos() const;
  bool is_eog(int32_t id) const;
  bool add_bos_default() const;
  // True when the tokenizer prepends a space to the text (SentencePiece dummy prefix); the first
  // piece generated after BOS then carries a leading space that is not part of the text.
  bool adds_space_prefix() const;

  // The Jinja chat template the file carries (tokenizer.chat_template), if any; Error when the key
  // holds something other than a string.
  std::optional<std::string> chat_template() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth
