// The activations of one forward pass for up to n_batch tokens, sized once when a session is made
// so that evaluating tokens never allocates. Each buffer holds one thing. Internal to src/model/.
#pragma once

#include <cstdint>

#include "core/aligned_buffer.h"
#include "model/config.h"
#include "ops/attention.h"
#include "ops/attention_block.h"

namespace hearth {

struct ForwardBuffers {
  ForwardBuffers() = default;
  // masked: Threshold mode's zeroed attention inputs; input_major_rows: the most rows that go
  // through input-major copies at once (0: none do).
  ForwardBuffers(const ModelConfig& c, const AttentionParams& attn, int32_t n_batch, int n_threads,
                 bool masked, int64_t input_major_rows);

  // Views of the attention's buffers, for attention_block and attention_residual.
  AttentionScratch attention() const;

  AlignedBuffer x;         // [n_batch, n_embd] residual stream
  AlignedBuffer xn;        // [n_batch, n_embd] the block's normed input (attention, then FFN)
  AlignedBuffer xa;        // [n_batch, n_embd] parallel blocks: the attention's own norm
  AlignedBuffer q;         // [n_batch, n_head * head_dim]
  AlignedBuffer k;         // [n_batch, n_embd_kv]
  AlignedBuffer v;         // [n_batch, n_embd_kv]
  AlignedBuffer att;       // [n_batch, n_head * head_dim] attention before wo
  AlignedBuffer attn_out;  // [n_batch, n_embd] the attention half's output
  AlignedBuffer ffn_out;   // [n_batch, n_embd] the FFN half's output
  AlignedBuffer pos_row;   // [n_embd] one learned position, dequantized
  AlignedBuffer attn_ws;   // attention_workspace_bytes(attn, n_threads)
  AlignedBuffer masked;    // [n_batch, n_embd] Threshold mode: attention input, small ones zeroed
  // Each input-major row's non-zero inputs (AttentionScratch's idx, compact and counts).
  AlignedBuffer input_idx;     // [rows, max(n_embd, q_dim)] int32
  AlignedBuffer input_values;  // [rows, max(n_embd, q_dim)]
  AlignedBuffer input_counts;  // [rows] int64
  AlignedBuffer qkv;           // [rows, q_dim + 2 n_embd_kv]  products through a joint q/k/v copy
  int64_t copy_rows = 0;       // rows
};

}  // namespace hearth
