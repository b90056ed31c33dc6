// The attention half of every architecture's block, as one implementation that the host session,
// the CPU stand-in device and the tests all run (only the CUDA device has kernels of its own,
// tested against this):
//
//   out[n, n_embd] = wo · attention(rope(wq · a + bq), rope(wk · a + bk), wv · a + bv) + bo
//
// (with BlockRecipe::qk_norm, every head of q and of k RMS-normed before RoPE) over the rows of
// several sequences' chunks at once: the projections take every row (one read of the weights),
// while RoPE, the KV caches and attention go chunk by chunk, each against its own sequence's
// cache. Absent biases are skipped; RoPE is skipped for models with learned
// positions (RopeType::None).
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/context.h"
#include "core/weight_views.h"
#include "hearth/session.h"
#include "hearth/types.h"
#include "ops/attention.h"
#include "ops/rope.h"

namespace hearth {

// The attention and RoPE parameters of a model's layers for a context of n_ctx positions: the
// host session and every device build theirs from here, so their caches and angles agree.
AttentionParams attention_params(const ModelConfig& c, int64_t n_ctx, KvType kv_type);
// `a` for layer il, whose window the model's sliding-window pattern decides.
AttentionParams layer_attention(const AttentionParams& a, const ModelConfig& c, int64_t il);
RopeParams rope_params(const ModelConfig& c, int64_t n_ctx);
// The RoPE of the sliding layers where the model gives them their own base
// (ModelConfig::rope_freq_base_swa > 0): that base, no scaling.
RopeParams sliding_rope_params(const ModelConfig& c);

// The context a session gets when none is asked for: the model's, but at most 4096 tokens.
int64_t default_context(const ModelConfig& c);

// y[n, n_embd] = the model's norm (RMSNorm, or LayerNorm with bias b) of x, weight w.
void block_norm(cpu::CpuContext& ctx, const ModelConfig& c, const float* x, const float* w,
                const float* b, int64_t n, float* y);

// One sequence's rows of a batch: rows row0 .. row0 + n - 1, at positions pos0 .. pos0 + n - 1,
// and that sequence's caches of the layer ([n_ctx, n_head_kv, head_dim] each).
struct AttentionChunk {
  int64_t row0 = 0;
  int64_t n = 0;
  int64_t pos0 = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  bool sparse = false;  // its rows apply the AttentionThresholds given
};

// Threshold mode's input sparsity in one layer's attention: in the rows of the chunks marked
// sparse, the elements of a projection's input at or below its threshold are zeroed first, so the
// product skips the weights they multiply (0: none are).
struct AttentionThresholds {
  float qkv = 0.0f;  // q, k and v's input a
  float wo = 0.0f;   // wo's input: the attention's output
  int32_t layer = 0;
  SparseStats* stats = nullptr;  // counts the weights skipped (SparseStats::count_inputs)
  // The sparse chunks' rows: the products whose input has a threshold read only the rows of the
  // layer's input-major copies whose input element is not zero, where it has them (at most
  // AttentionScratch::copy_rows rows at a time); else the zeroed inputs go through the dense
  // products, as the other chunks' inputs do.
  const InputMajorLayer* input_major = nullptr;
};

// Activation buffers for up to n_batch rows, each holding one thing.
struct AttentionScratch {
  float* xn = nullptr;   // [n_batch, n_embd]            the normed input (attention_residual)
  float* q = nullptr;    // [n_batch, n_head * head_dim]
  float* k = nullptr;    // [n_batch, n_embd_kv]
  float* v = nullptr;    // [n_batch, n_embd_kv]
  float* att = nullptr;  // [n_batch, n_head * head_dim]  attention before wo
  float* out = nullptr;  // [n_batch, n_embd]            wo's output (attention_residual)
  void* workspace = nullptr;  // attention_workspace_bytes(attn, ctx.n_threads())
  float* masked = nullptr;    // [n_batch, n_embd] a with its small elements zeroed (qkv > 0)
  // input_major, per row (rows: the most the session passes through the copies):
  int32_t* idx = nullptr;     // [rows, max(n_embd, q_dim)] the row's inputs that are not zero,
  float* compact = nullptr;   // [rows, max(n_embd, q_dim)] their values,
  int64_t* counts = nullptr;  // [rows]                     and how many
  float* qkv = nullptr;       // [rows, q_dim + 2 kv_dim]   q, k, v through a joint copy (wqkv_t)
  int64_t copy_rows = 0;      // rows
};

// out[n, n_embd] = the attention of layer l over the input rows a[n, n_embd] (already normed),
// chunk by chunk; the chunks' rows cover 0 .. n - 1. Stores each chunk's K and V in its caches.
void attention_block(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                     const RopeTable& rope, const LayerWeights& l,
                     std::span<const AttentionChunk> chunks, const AttentionScratch& s,
                     const float* a, int64_t n, float* out, const AttentionThresholds& th = {});

// x[n, n_embd] += attention_block(norm(x; attn_norm)), normed again by post_attention_norm where
// the recipe has one: a sequential block's attention half.
void attention_residual(cpu::CpuContext& ctx, const ModelConfig& c, const AttentionParams& attn,
                        const RopeTable& rope, const LayerWeights& l,
                        std::span<const AttentionChunk> chunks, const AttentionScratch& s,
                        float* x, int64_t n, const AttentionThresholds& th = {});

}  // namespace hearth
