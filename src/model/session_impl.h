// What a Session holds: the KV cache and every activation buffer, sized once at construction so
// that evaluating tokens never allocates. Internal to src/model/.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/cpu/context.h"
#include "core/aligned_buffer.h"
#include "hearth/session.h"
#include "core/trace.h"
#include "model/model_impl.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/attention_block.h"
#include "ops/rope.h"
#include "sparse/ffn.h"

namespace hearth {

struct Session::Impl {
  Impl(std::shared_ptr<const Model> model, const SessionOptions& options);

  std::shared_ptr<const Model> model_ref;
  const Model::Impl& model;
  const ModelConfig& config;
  int32_t n_ctx;
  int32_t n_batch;
  cpu::CpuContext ctx;
  std::unique_ptr<cpu::MatmulHook> matmul_names;  // SessionOptions::matmul_observer, by name
  AttentionParams attn;
  RopeTable rope;
  RopeTable rope_swa;  // the sliding layers' own RoPE (ModelConfig::rope_freq_base_swa), or empty
  Activation act;
  SparseMode sparse_mode;   // resolved: never Auto
  // Threshold mode: per layer, the options' or else the file's; other modes: empty.
  std::vector<LayerThresholds> thresholds;
  bool sparse_prompt;  // SessionOptions::sparse_prompt
  bool sparse_audit;
  SparseStats stats;
  int32_t n_seq;
  std::vector<int32_t> n_past;  // [n_seq] tokens in each sequence's context

  // One sequence's tokens in the forward pass being run: activation rows row0 .. row0 + n - 1,
  // at positions pos0 .. pos0 + n - 1 of the sequence.
  struct Chunk {
    int32_t seq = 0;
    int64_t row0 = 0;
    int64_t n = 0;
    int64_t pos0 = 0;
  };
  std::vector<Chunk> chunks;        // [n_seq] capacity; the pass uses the first n_chunks
  size_t n_chunks = 0;
  std::vector<int64_t> chunk_rows;  // [n_seq] the chunks' n, for the FFN executor
  std::vector<int64_t> row_pos;     // [n_batch] position of each activation row

  std::vector<AlignedBuffer> k_cache;  // per layer [n_seq, n_ctx, n_head_kv, head_dim]
  std::vector<AlignedBuffer> v_cache;
  std::vector<AttentionChunk> attn_chunks;  // [n_seq] the pass's chunks with one layer's caches
  // Activations for up to n_batch tokens, each buffer holding one thing.
  AlignedBuffer x;         // [n_batch, n_embd] residual stream
  AlignedBuffer xn;        // [n_batch, n_embd] the block's normed input (attention, then FFN)
  AlignedBuffer xa;        // [n_batch, n_embd] parallel blocks: the attention's own norm
  AlignedBuffer q;         // [n_batch, n_head * head_dim]
  AlignedBuffer k;         // [n_batch, n_embd_kv]
  AlignedBuffer v;         // [n_batch, n_embd_kv]
  AlignedBuffer att;       // [n_batch, n_head * head_dim] attention before wo
  AlignedBuffer attn_out;  // [n_batch, n_embd] the attention half's output
  AlignedBuffer ffn_out;   // [n_batch, n_embd] the FFN half's output
  AlignedBuffer attn_ws;
  AlignedBuffer masked;    // [n_batch, n_embd] Threshold mode: attention input, small ones zeroed
  // Model-wide thresholds over input-major copies: a decode step's non-zero inputs.
  const sparse::InputMajor* input_major = nullptr;
  // input_major: each row's non-zero inputs, for the rows that go through the copies (decode
  // steps, and prompts when they are sparse): AttentionScratch's idx, compact and counts.
  AlignedBuffer input_idx;     // [rows, max(n_embd, q_dim)] int32
  AlignedBuffer input_values;  // [rows, max(n_embd, q_dim)]
  AlignedBuffer input_counts;  // [rows] int64
  AttentionScratch attn_scratch;  // views of the buffers above
  std::vector<sparse::FfnWeights> ffn_weights;  // per layer
  // Hybrid execution: this session's part on the model's device, and per layer the host's FFN
  // restricted to the cold neurons (where the device has hot ones).
  std::unique_ptr<backend::DeviceSession> device;
  std::vector<sparse::FfnWeights> ffn_cold;
  std::unique_ptr<TraceRecorder> trace;
  sparse::FfnExecutor ffn;
  uint64_t non_ffn_bytes = 0;  // attention and output weights read by one forward pass
  std::vector<float> logits;  // [n_vocab] of the last token

  // Runs the chunks (at most n_batch tokens in all, checked) in one pass, each at the end of its
  // sequence, and advances the sequences. Writes into `out` the logits of every token ([n,
  // n_vocab]) when all_rows, else of each chunk's last token ([chunks, n_vocab]).
  void forward(std::span<const SeqTokens> batch, float* out, bool all_rows);
  // The layers of any block recipe (ModelConfig::block), from the token embeddings that forward()
  // puts in x[n, n_embd] to the final residual stream, left in x.
  void sequential_layer(size_t il, int64_t n);
  void parallel_layer(size_t il, int64_t n);
  // The RoPE table of layer il.
  const RopeTable& layer_rope(size_t il) const;
  // x[n, n_embd] += the learned position of each row (BlockRecipe::learned_positions).
  void add_positions(int64_t n);
  // attn_chunks = the pass's chunks with layer il's caches, those that the mode's input
  // thresholds apply to marked sparse.
  std::span<const AttentionChunk> layer_chunks(size_t il);
  // Layer il's attention input thresholds for a pass of n rows (none outside Threshold mode).
  AttentionThresholds attention_thresholds(size_t il, int64_t n);
  // The final norm and output projection, from the residual stream the layers leave in x.
  void output_head(int64_t n, float* out, bool all_rows);
  void check_seq(int32_t seq) const;
  void check_tokens(int32_t seq, std::span<const int32_t> tokens) const;
  void check_batch(std::span<const SeqTokens> batch, size_t n_logits) const;
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
  float layer_threshold(size_t il, float threshold_override) const;
};

}  // namespace hearth
