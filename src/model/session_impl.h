// What a Session holds, and the forward pass over any block recipe. Its parts each keep one
// concern: the KV cache (kv_cache.h), the rows of a pass (pass_layout.h), the activations
// (forward_buffers.h), the resolved sparse mode (session_sparsity.h), and the FFN executor; the
// hybrid part adds the model's device session and the host's cold neurons. Everything is sized at
// construction, so evaluating tokens never allocates. Internal to src/model/.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "backend/cpu/context.h"
#include "core/trace.h"
#include "hearth/session.h"
#include "model/forward_buffers.h"
#include "model/kv_cache.h"
#include "model/model_impl.h"
#include "model/pass_layout.h"
#include "model/session_sparsity.h"
#include "ops/attention.h"
#include "ops/rope.h"
#include "sparse/ffn.h"

namespace hearth {

class Session::Impl {
 public:
  Impl(std::shared_ptr<const Model> model, const SessionOptions& options);

  // Session::eval (eval_prompt when `prompt`) and eval_all: sequence 0's tokens in passes of
  // n_batch; the last token's logits, or every token's into `out`.
  std::span<const float> eval(std::span<const int32_t> tokens, bool prompt);
  void eval_all(std::span<const int32_t> tokens, std::span<float> out);
  // Evaluates the chunks (checked) in one pass, each at the end of its sequence; `logits` gets
  // each chunk's last token's.
  void eval_batch(std::span<const SeqTokens> batch, std::span<float> logits);

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  int32_t n_batch() const { return n_batch_; }
  int n_threads() const { return ctx_.n_threads(); }
  const Model& model() const { return *model_ref_; }
  SparseMode sparse_mode() const { return sparsity_.mode(); }
  bool prompt_matches_decode() const {
    return sparsity_.mode() == SparseMode::Dense || sparsity_.sparse_prompt();
  }
  SparseStats& stats() { return stats_; }
  const TraceRecorder* trace() const { return trace_.get(); }
  bool has_device() const { return device_ != nullptr; }

 private:
  // Evaluates sequence 0's tokens (checked) in passes of n_batch, marked as a prompt's when
  // `prompt` (SeqTokens::prompt). Writes into `out` the logits of every token ([n, n_vocab]) when
  // all_rows, else of the last token ([n_vocab]).
  void eval_tokens(std::span<const int32_t> tokens, float* out, bool all_rows, bool prompt);
  void check_tokens(int32_t seq, std::span<const int32_t> tokens) const;
  void check_batch(std::span<const SeqTokens> batch, size_t n_logits) const;

  // Runs the chunks in one pass and advances the sequences. Writes into `out` the logits of
  // every token ([n, n_vocab]) when all_rows, else of each chunk's last token ([chunks, n_vocab]).
  void forward(std::span<const SeqTokens> batch, float* out, bool all_rows);
  // One layer of the block recipe (ModelConfig::block) over the residual stream x[n, n_embd].
  void sequential_layer(size_t il, int64_t n);
  void parallel_layer(size_t il, int64_t n);
  // The RoPE table of layer il.
  const RopeTable& layer_rope(size_t il) const;
  // x[n, n_embd] += the learned position of each row (BlockRecipe::learned_positions).
  void add_positions(int64_t n);
  // The pass's chunks with layer il's caches, those the mode's input thresholds apply to marked.
  std::span<const AttentionChunk> layer_chunks(size_t il);
  // The final norm and output projection, from the residual stream the layers leave in x.
  void output_head(int64_t n, float* out, bool all_rows);

  // x[n, n_embd] += attention of layer il of a sequential block for every chunk, on the device
  // when it holds the layer (session_hybrid.cc).
  void run_attention(size_t il, int64_t n);
  // ffn_out[n, n_embd] = FFN of layer il over xn (p: the predictor's input); hot neurons on the
  // device and cold ones on the host at the same time when the layer is split (session_hybrid.cc).
  void run_ffn(size_t il, const float* xn, const float* p, int64_t n);
  // out[n, n_embd] = the FFN of layer il split: the device's hot neurons while the host computes
  // the cold ones, summed. n <= sparse::kMaxSparseBatch.
  void split_ffn(size_t il, const float* xn, const float* p, int64_t n, float* out);
  void open_device(const SessionOptions& o);
  // Per layer: the FFN's matrices and threshold. threshold_override: SessionOptions'.
  void bind_ffn(float threshold_override);

  std::shared_ptr<const Model> model_ref_;
  const Model::Impl& model_;
  const ModelConfig& config_;
  AttentionParams attn_;  // its n_ctx is the session's
  int32_t n_batch_;
  cpu::CpuContext ctx_;
  std::unique_ptr<cpu::MatmulHook> matmul_names_;  // SessionOptions::matmul_observer, by name
  RopeTable rope_;
  RopeTable rope_swa_;  // the sliding layers' own RoPE (ModelConfig::rope_freq_base_swa), or empty
  SessionSparsity sparsity_;
  SparseStats stats_;
  KvCache kv_;
  PassLayout pass_;
  ForwardBuffers buf_;
  AttentionScratch attn_scratch_;  // views of buf_
  std::vector<sparse::FfnWeights> ffn_weights_;  // per layer
  sparse::FfnExecutor ffn_;
  uint64_t non_ffn_bytes_ = 0;  // attention and output weights read by one forward pass
  std::vector<float> logits_;   // [n_vocab] of the last token

  // Hybrid execution: this session's part on the model's device, and per layer the host's FFN
  // restricted to the cold neurons (where the device has hot ones).
  std::unique_ptr<backend::DeviceSession> device_;
  std::vector<sparse::FfnWeights> ffn_cold_;
  std::unique_ptr<TraceRecorder> trace_;
};

}  // namespace hearth
