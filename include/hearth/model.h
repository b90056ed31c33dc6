// A loaded model: immutable after load (config, mmapped weights, tokenizer), so any number of
// Sessions can share one Model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hearth/types.h"

namespace hearth {

// Where the parts of a model run (hybrid CPU/GPU execution, DESIGN.md section 1). The placement
// solver puts attention and the KV cache, then predictors, then the most frequently active FFN
// neurons on the device, within the budget; the CPU computes the rest at the same time.
struct DeviceOptions {
  // "none": CPU only. "auto": a CUDA GPU when this build and machine have one, else none.
  // "cuda": a CUDA GPU (an error when there is none). "standin": the CPU stand-in for a GPU (a
  // second CPU backend with standin_gib of memory; tests and demonstrations).
  std::string device = "none";
  double vram_budget_gib = -1.0;  // < 0: the device's free memory less a safety margin
  double standin_gib = 4.0;
  int32_t standin_threads = 1;
  // "neurons": by activation frequency (hybrid sparse); "layers": whole layers in order, as
  // llama.cpp's -ngl offloads (the dense baseline).
  std::string placement = "neurons";
  bool reset_gpu_index = false;    // solve again even when the cached placement matches
  bool disable_gpu_index = false;  // no FFN neurons on the device (attention only)
  // What sessions will need, so the budget leaves room for it: their context (0: the model's, at
  // most 4096), count, prompt batch, cache type, and sparse mode (Predictor places predictors).
  int32_t n_ctx = 0;
  int32_t n_seq = 1;
  int32_t n_batch = 512;
  KvType kv_type = KvType::F16;
  SparseMode sparse = SparseMode::Auto;
};

// How a model's weights come into memory. Map: the file is mapped, its pages read on demand and
// shared with the page cache. Read: it is copied once into private huge-page memory (--no-mmap),
// which decodes faster where streaming from the page cache is slow (under a hypervisor, most
// VMs), at the cost of memory that cannot be dropped under pressure. Auto: Read when the system
// gives huge pages and the file takes at most half of the available memory, else Map.
enum class WeightLoad { Auto, Map, Read };

// Which matrices LoadOptions::row_groups holds as row groups.
enum class RowGroups {
  None,
  // The ones every sparse mode also reads whole: attention's (where the model has no thresholds
  // on attention's inputs, which read input-major copies made from the rows) and an untied
  // output head. The FFN keeps its rows for the gathers and neuron-major copies.
  WholeReads,
  // Every one, where the model's sessions run dense (`--sparse auto` resolves to dense); on other
  // models the same as WholeReads.
  All,
};

struct LoadOptions {
  WeightLoad weights = WeightLoad::Auto;
  // Hold each FFN layer's neurons most-active first, by the firing frequencies calibration stored
  // (blk.N.ffn_act_freq; other layers keep the file's order). The model computes the same
  // function; sparse decoding reads the active rows in long consecutive runs, which is faster.
  // Costs a copy of those layers' gate, up, down_t and fc2 at load for a mapped file (none for a
  // file read into memory, which permutes its private copy). Off by default for tools that read
  // the weights by file position (calibrate, quantize); the CLI's inference commands turn it on.
  bool reorder_neurons = false;
  // Hold float predictors (fc1, fc2) in Q8_0 where their rows are whole blocks: predictor-mode
  // decode reads about half the predictor bytes, and selects the same neurons but where a score
  // lies within Q8_0's rounding of the threshold. Off by default, as reorder_neurons, for tools
  // that read the weights by file position; the CLI's inference commands turn it on.
  bool q8_predictors = false;
  // On a model-wide threshold file (hearth calibrate --sparsity) whose projections are F32 or
  // F16, at least input_major_min_width wide, with no device: hold q, k, v, o, gate and up only as
  // the input-major copies that threshold decode steps read, in the place of the file's matrices.
  // Every product gives the same bits as before, prompts at about the same speed; the model takes
  // about its file's memory instead of about 1.75 times it, but dense decode steps (a dense or
  // oracle session on it) run slower. Off by default; the CLI's inference commands turn it on
  // where every session is to run thresholds (--keep-matrices turns it off).
  bool input_major_only = false;
  int32_t input_major_min_width = 512;  // as SessionOptions'
  // With no device: hold block-quantized matrices of the types whose groups pay at this CPU's
  // level (backend/cpu/kernels/row_groups.h) in 16-row groups, a layout whose one-token products
  // need no horizontal sums, so decode reads them at up to the memory's speed. The same bytes;
  // products round differently from the row layout's. Which matrices (RowGroups): those that
  // every mode reads whole, or every one where sessions run dense. Sparse sessions cannot read
  // an FFN held so (they fail to open). Off by default; the CLI's inference commands ask for
  // every matrix where every session is to run dense, else for the whole-read ones (--no-repack
  // turns it off).
  RowGroups row_groups = RowGroups::None;
  DeviceOptions device;
};

class Model {
 public:
  // Maps and validates the GGUF file. Throws hearth::Error with a clear message (file, key or
  // tensor named) on any problem: missing file, not GGUF, truncated, unsupported arch or type.
  // use_mmap = false reads the file into private memory instead of mapping it (WeightLoad::Read).
  static std::shared_ptr<const Model> load(const std::string& path, bool use_mmap = true);
  // The same, then places part of the model on a device (options.device). Throws hearth::Error
  // when the device is missing or the budget exceeds its free memory.
  static std::shared_ptr<const Model> load(const std::string& path, const LoadOptions& options);
  ~Model();

  const ModelConfig& config() const;
  const std::string& path() const;
  // Total bytes of weight data that one decode step reads (all matrices once, embeddings excluded).
  uint64_t weight_bytes_per_token() const;
  uint64_t file_bytes() const;
  // Whether the weights were read into private memory (WeightLoad::Read, or Auto resolved to it)
  // rather than mapped.
  bool weights_in_memory() const;

  // Whether every FFN layer has a predictor (blk.N.fc1/fc2), so SparseMode::Predictor can run.
  bool has_predictors() const;
  // The predictor threshold stored in the file (hearth.sparse_threshold, else
  // powerinfer.sparse_threshold, else 0).
  float sparse_threshold() const;
  // Whether the file has calibrated per-layer magnitude thresholds (ModelConfig::thresholds), so
  // SparseMode::Threshold can run.
  bool has_thresholds() const;
  // Whether the file is a PowerInfer model (magic PWRI).
  bool is_powerinfer() const;

  // One line on why `--sparse auto` does not run the file's own sparsity (empty when it does, or
  // has none): a model-wide file whose thresholds would save too few bytes to pay.
  const std::string& sparse_note() const;

  // The device part of the model: its name (empty when CPU only) and one line on what was placed
  // there and why (empty when CPU only).
  std::string device_name() const;
  const std::string& placement_note() const;
  // Device memory in use now and at most, in bytes (0 without a device).
  uint64_t device_allocated() const;
  uint64_t device_peak_allocated() const;

  // Tokenizer.
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos, bool parse_special = false) const;
  // As tokenize(text, add_bos, /*parse_special=*/true), except inside the byte ranges `literal`
  // ([first, second) offsets into text, ascending and disjoint): a control token written there
  // stays text. A chat prompt's markup is parsed, its messages' content is not.
  std::vector<int32_t> tokenize(std::string_view text, bool add_bos,
                                std::span<const std::pair<size_t, size_t>> literal) const;
  std::string token_to_piece(int32_t id) const;
  // The token's text as the vocabulary spells it ("<|begin_of_text|>"); empty for id -1.
  std::string token_text(int32_t id) const;
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
