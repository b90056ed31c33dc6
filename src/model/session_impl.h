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
#include "model/attention_block.h"
#include "model/model_impl.h"
#include "ops/activation.h"
#include "ops/attention.h"
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
  AttentionParams attn;
  RopeTable rope;
  Activation act;
  SparseMode sparse_mode;   // resolved: never Auto
  bool sparse_audit;
  SparseStats stats;
  int32_t n_past = 0;

  std::vector<AlignedBuffer> k_cache;  // per layer [n_ctx, n_head_kv, head_dim]
  std::vector<AlignedBuffer> v_cache;
  // Activations for up to n_batch tokens.
  AlignedBuffer x;      // [n_batch, n_embd] residual stream
  AlignedBuffer xn;     // [n_batch, n_embd] normed input / projection output
  AlignedBuffer q;      // [n_batch, n_head * head_dim]
  AlignedBuffer k;      // [n_batch, n_embd_kv]
  AlignedBuffer v;      // [n_batch, n_embd_kv]
  AlignedBuffer att;    // [n_batch, n_head * head_dim]
  AlignedBuffer ffn_out;  // [n_batch, n_embd]
  AlignedBuffer attn_ws;
  AttentionScratch attn_scratch;  // views of xn, q, k, v, att, attn_ws
  std::vector<sparse::FfnWeights> ffn_weights;  // per layer
  // Hybrid execution: this session's part on the model's device, and per layer the host's FFN
  // restricted to the cold neurons (where the device has hot ones).
  std::unique_ptr<backend::DeviceSession> device;
  std::vector<sparse::FfnWeights> ffn_cold;
  std::unique_ptr<TraceRecorder> trace;
  sparse::FfnExecutor ffn;
  uint64_t non_ffn_bytes = 0;  // attention and output weights read by one forward pass
  std::vector<float> logits;  // [n_vocab] of the last token

  // Runs the tokens (at most n_batch of them) at positions n_past.. and advances n_past. Writes
  // the logits of every token into all_logits ([n, n_vocab]) when given, else of the last token
  // into `logits`.
  void forward(const int32_t* tokens, int64_t n, float* all_logits);
  // The layers of the architecture family (forward_<family>.cc): from the token embeddings that
  // forward() puts in x[n, n_embd] to the final residual stream, left in x.
  void forward_llama(int64_t n);
  void forward_falcon(int64_t n);
  void forward_opt(int64_t n);
  // The final norm and output projection, from the residual stream the family's pass leaves in x.
  void output_head(int64_t n, float* all_logits);
  void check_tokens(std::span<const int32_t> tokens) const;
  // x[n, n_embd] += attention of layer il (Llama family), on the device when it holds the layer.
  void run_attention(size_t il, int64_t n, int64_t pos0);
  // ffn_out[n, n_embd] = FFN of layer il over xn (p: the predictor's input); hot neurons on the
  // device and cold ones on the host at the same time when the layer is split (session_ffn.cc).
  void run_ffn(size_t il, const float* xn, const float* p, int64_t n);
  void open_device(const SessionOptions& o);
  // Per layer: the FFN's matrices and threshold. threshold_override: SessionOptions'.
  void bind_ffn(float threshold_override);
  float layer_threshold(size_t il, float threshold_override) const;
};

}  // namespace hearth
