// Session::Impl::forward: what every family shares (token embeddings, the attention of each
// sequence's chunk, the output head, the bookkeeping) around the family's layers
// (forward_<family>.cc). A pass runs the chunks of several sequences as one batch of rows: norms,
// projections and the FFN see all rows at once (the weights are read once per pass); only RoPE,
// the KV cache and attention need to know which sequence a row belongs to.
#include <cstring>

#include "core/quantize.h"
#include "model/linear.h"
#include "model/session_impl.h"
#include "ops/norm.h"

namespace hearth {

void Session::Impl::forward(std::span<const SeqTokens> batch, float* out, bool all_rows) {
  // x[n, n_embd] = token_embd[tokens], the chunks one after the other; each family's pass starts
  // from it.
  const Matrix& embd = model.weights.token_embd;
  const int64_t n_embd = config.n_embd;
  int64_t n = 0;
  n_chunks = 0;
  for (const SeqTokens& b : batch) {
    const auto len = static_cast<int64_t>(b.tokens.size());
    const int64_t pos0 = n_past[static_cast<size_t>(b.seq)];
    chunk_rows[n_chunks] = len;
    chunks[n_chunks++] = Chunk{b.seq, n, len, pos0};
    for (int64_t t = 0; t < len; ++t, ++n) {
      dequantize_row(embd.type, embd.row(b.tokens[static_cast<size_t>(t)]), x.f32() + n * n_embd,
                     n_embd);
      row_pos[static_cast<size_t>(n)] = pos0 + t;
    }
  }
  ffn.set_chunks({chunk_rows.data(), n_chunks});
  switch (model.family) {
    case ArchFamily::Llama: forward_llama(n); break;
    case ArchFamily::Falcon: forward_falcon(n); break;
    case ArchFamily::Opt: forward_opt(n); break;
  }
  output_head(n, out, all_rows);
  for (const Chunk& c : std::span(chunks.data(), n_chunks)) {
    n_past[static_cast<size_t>(c.seq)] += static_cast<int32_t>(c.n);
  }
  stats.tokens += static_cast<uint64_t>(n);
  stats.weight_bytes += non_ffn_bytes;
}

void Session::Impl::attend(size_t il, bool rotate) {
  const int n_head = static_cast<int>(config.n_head), head_dim = static_cast<int>(config.head_dim);
  const int n_head_kv = static_cast<int>(config.n_head_kv);
  const int64_t q_dim = static_cast<int64_t>(n_head) * head_dim;
  const int64_t kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  const size_t seq_bytes = kv_cache_bytes(attn);
  for (const Chunk& c : std::span(chunks.data(), n_chunks)) {
    float* const qc = q.f32() + c.row0 * q_dim;
    float* const kc = k.f32() + c.row0 * kv_dim;
    if (rotate) {
      rope.apply(qc, c.n, n_head, head_dim, c.pos0);
      rope.apply(kc, c.n, n_head_kv, head_dim, c.pos0);
    }
    const size_t at = static_cast<size_t>(c.seq) * seq_bytes;
    void* const kcache = static_cast<char*>(k_cache[il].data()) + at;
    void* const vcache = static_cast<char*>(v_cache[il].data()) + at;
    kv_store(ctx.isa(), attn, kc, 0, c.pos0, c.n, kcache);
    kv_store(ctx.isa(), attn, v.f32() + c.row0 * kv_dim, 0, c.pos0, c.n, vcache);
    attention(ctx, attn, qc, kcache, vcache, c.pos0, c.n, att.f32() + c.row0 * q_dim,
              attn_ws.data());
  }
}

// logits = output · norm(x): of every row into out when all_rows, else of each chunk's last row.
void Session::Impl::output_head(int64_t n, float* out, bool all_rows) {
  const ModelConfig& c = config;
  const Weights& w = model.weights;
  const int64_t n_embd = c.n_embd;
  float* const xs = x.f32();
  float* const xns = xn.f32();
  int64_t rows = n;
  if (!all_rows) {
    // The chunks' last rows to the front of x; row i comes from a row at or after i, so moving
    // them in order never overwrites one still to be read.
    rows = static_cast<int64_t>(n_chunks);
    for (int64_t i = 0; i < rows; ++i) {
      const Chunk& ch = chunks[static_cast<size_t>(i)];
      const int64_t last = ch.row0 + ch.n - 1;
      if (last != i) std::memcpy(xs + i * n_embd, xs + last * n_embd, n_embd * sizeof(float));
    }
  }
  if (c.norm == NormType::Layer) {
    layer_norm_rows(ctx, xs, w.output_norm, w.output_norm_b, c.norm_eps, rows, n_embd, xns);
  } else {
    rms_norm_rows(ctx, xs, w.output_norm, c.norm_eps, rows, n_embd, xns);
  }
  linear(ctx, w.output, xns, rows, out);
}

}  // namespace hearth
