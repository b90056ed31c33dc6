#include "model/forward_buffers.h"

#include <algorithm>

namespace hearth {

ForwardBuffers::ForwardBuffers(const ModelConfig& c, const AttentionParams& attn, int32_t n_batch,
                               int n_threads, bool masked_inputs, int64_t input_major_rows) {
  const size_t b = static_cast<size_t>(n_batch) * sizeof(float);
  const size_t n_embd = static_cast<size_t>(c.n_embd);
  const size_t q_dim = static_cast<size_t>(c.n_head * c.head_dim);
  x = AlignedBuffer(b * n_embd);
  xn = AlignedBuffer(b * n_embd);
  if (c.block.parallel) xa = AlignedBuffer(b * n_embd);
  q = AlignedBuffer(b * q_dim);
  k = AlignedBuffer(b * c.n_embd_kv());
  v = AlignedBuffer(b * c.n_embd_kv());
  att = AlignedBuffer(b * q_dim);
  attn_out = AlignedBuffer(b * n_embd);
  ffn_out = AlignedBuffer(b * n_embd);
  if (c.block.learned_positions) pos_row = AlignedBuffer(n_embd * sizeof(float));
  attn_ws = AlignedBuffer(attention_workspace_bytes(attn, n_threads));
  if (masked_inputs) masked = AlignedBuffer(b * n_embd);
  if (input_major_rows > 0) {
    copy_rows = input_major_rows;
    const size_t values = std::max(n_embd, q_dim) * static_cast<size_t>(input_major_rows);
    input_idx = AlignedBuffer(values * sizeof(int32_t));
    input_values = AlignedBuffer(values * sizeof(float));
    input_counts = AlignedBuffer(static_cast<size_t>(input_major_rows) * sizeof(int64_t));
    qkv = AlignedBuffer((q_dim + 2 * static_cast<size_t>(c.n_embd_kv())) *
                        static_cast<size_t>(input_major_rows) * sizeof(float));
  }
}

AttentionScratch ForwardBuffers::attention() const {
  return AttentionScratch{xn.f32(),
                          q.f32(),
                          k.f32(),
                          v.f32(),
                          att.f32(),
                          attn_out.f32(),
                          attn_ws.data(),
                          masked.f32(),
                          static_cast<int32_t*>(input_idx.data()),
                          input_values.f32(),
                          static_cast<int64_t*>(input_counts.data()),
                          qkv.f32(),
                          copy_rows};
}

}  // namespace hearth
