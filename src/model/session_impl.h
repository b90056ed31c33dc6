// What a Session holds: the KV cache and every activation buffer, sized once at construction so
// that evaluating tokens never allocates. Internal to src/model/.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/cpu/context.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/rope.h"
#include "sparse/ffn.h"

namespace hearth {

// 64-byte aligned float/byte storage (the attention workspace and SIMD-friendly activations).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  void* data() const { return ptr_.get(); }
  float* f32() const { return static_cast<float*>(ptr_.get()); }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

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
  std::vector<sparse::FfnWeights> ffn_weights;  // per layer
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
  // Per layer: the FFN's matrices and threshold. threshold_override: SessionOptions'.
  void bind_ffn(float threshold_override);
  float layer_threshold(size_t il, float threshold_override) const;
};

}  // namespace hearth
