// Session::Impl::forward: one pass over any block recipe (ModelConfig::block). Token embeddings
// (plus learned positions), then each layer sequential or parallel, then the output head. A pass
// runs the chunks of several sequences as one batch of rows: norms, projections and the FFN see
// all rows at once (the weights are read once per pass); only RoPE, the KV cache and attention
// need to know which sequence a row belongs to.
//
//   sequential: x += attn(norm(x; attn_norm));  x += ffn(norm(x; ffn_norm))
//               (post_norms: x += norm(attn(...); post_attention_norm), and so for the FFN)
//   parallel:   h = norm(x; attn_norm);  x += (attn(norm(x; attn_norm_2), else h) + ffn(h))
//
// The FFN's predictor reads the layer's residual stream x itself, as PowerInfer's graphs do.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/quantize.h"
#include "model/session_impl.h"
#include "ops/attention_block.h"
#include "ops/linear.h"

namespace hearth {

void Session::Impl::forward(std::span<const SeqTokens> batch, float* out, bool all_rows) {
  // x[n, n_embd] = token_embd[tokens], the chunks one after the other.
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
  // Every attention and output weight, less what input-sparse products skip (attention_block).
  stats.weight_bytes += non_ffn_bytes;
  if (config.block.scaled_embd) {
    vec_scale(ctx.isa(), x.f32(), std::sqrt(static_cast<float>(n_embd)), n * n_embd);
  }
  if (config.block.learned_positions) add_positions(n);
  ffn.set_chunks({chunk_rows.data(), n_chunks});
  for (size_t il = 0; il < model.weights.layers.size(); ++il) {
    if (config.block.parallel) {
      parallel_layer(il, n);
    } else {
      sequential_layer(il, n);
    }
  }
  output_head(n, out, all_rows);
  for (const Chunk& c : std::span(chunks.data(), n_chunks)) {
    n_past[static_cast<size_t>(c.seq)] += static_cast<int32_t>(c.n);
  }
  stats.tokens += static_cast<uint64_t>(n);
}

void Session::Impl::add_positions(int64_t n) {
  const Weights& w = model.weights;
  const int64_t n_embd = config.n_embd, offset = config.block.pos_offset;
  // The position table ends the context: there is nothing to read past its last row.
  const int64_t n_pos = w.pos_embd.rows - offset;
  float* const row = attn_out.f32();  // [n_embd] scratch until the first layer's attention
  for (int64_t t = 0; t < n; ++t) {
    if (row_pos[t] >= n_pos) {
      fail("position ", row_pos[t], " is past the ", n_pos, " learned positions of this ",
           config.arch, " model; use a context of at most ", n_pos, " tokens");
    }
    dequantize_row(w.pos_embd.type, w.pos_embd.row(row_pos[t] + offset), row, n_embd);
    vec_add(ctx.isa(), x.f32() + t * n_embd, row, n_embd);
  }
}

void Session::Impl::sequential_layer(size_t il, int64_t n) {
  const LayerWeights& l = model.weights.layers[il];
  float* const xs = x.f32();
  run_attention(il, n);
  block_norm(ctx, config, xs, l.ffn_norm, l.ffn_norm_b, n, xn.f32());
  run_ffn(il, xn.f32(), xs, n);
  float* const f = ffn_out.f32();
  if (l.ffn_post_norm) block_norm(ctx, config, f, l.ffn_post_norm, nullptr, n, f);
  vec_add(ctx.isa(), xs, f, n * config.n_embd);
}

void Session::Impl::parallel_layer(size_t il, int64_t n) {
  const LayerWeights& l = model.weights.layers[il];
  float* const xs = x.f32();
  float* const h = xn.f32();
  block_norm(ctx, config, xs, l.attn_norm, l.attn_norm_b, n, h);
  const float* a = h;
  if (l.attn_norm_2) {
    block_norm(ctx, config, xs, l.attn_norm_2, l.attn_norm_2_b, n, xa.f32());
    a = xa.f32();
  }
  TraceScope span(trace.get(), TraceRecorder::kHost, "attention");
  attention_block(ctx, config, layer_attention(attn, config, static_cast<int64_t>(il)),
                  layer_rope(il), l, layer_chunks(il), attn_scratch, a, n, attn_out.f32(),
                  attention_thresholds(il, n));
  run_ffn(il, h, xs, n);
  // x += (attention + ffn), summed in llama.cpp's order.
  float* const ao = attn_out.f32();
  vec_add(ctx.isa(), ao, ffn_out.f32(), n * config.n_embd);
  vec_add(ctx.isa(), xs, ao, n * config.n_embd);
}

const RopeTable& Session::Impl::layer_rope(size_t il) const {
  const bool own =
      config.rope_freq_base_swa > 0.0f && config.sliding_layer(static_cast<int64_t>(il));
  return own ? rope_swa : rope;
}

std::span<const AttentionChunk> Session::Impl::layer_chunks(size_t il) {
  const size_t seq_bytes = kv_cache_bytes(attn);
  for (size_t i = 0; i < n_chunks; ++i) {
    const Chunk& c = chunks[i];
    const size_t at = static_cast<size_t>(c.seq) * seq_bytes;
    attn_chunks[i] = AttentionChunk{c.row0, c.n, c.pos0,
                                    static_cast<char*>(k_cache[il].data()) + at,
                                    static_cast<char*>(v_cache[il].data()) + at};
    // As the FFN decides (sparse::FfnExecutor): decode-sized chunks, or all when prompts are too.
    attn_chunks[i].sparse = sparse_mode == SparseMode::Threshold &&
                            (sparse_prompt || c.n <= sparse::kMaxSparseBatch);
  }
  return {attn_chunks.data(), n_chunks};
}

AttentionThresholds Session::Impl::attention_thresholds(size_t il, int64_t n) {
  if (thresholds.empty()) return {};
  AttentionThresholds th{thresholds[il].attn_in, thresholds[il].attn_out,
                         static_cast<int32_t>(il), &stats};
  // Sparse rows read the input-major copies: a decode step's, and a prompt's when prompts are
  // sparse (so that every token gets what it gets alone).
  if (input_major && (n <= sparse::kMaxSparseBatch || sparse_prompt)) {
    th.input_major = &input_major->layers[il];
  }
  return th;
}

// logits = output · norm(x): of every row into out when all_rows, else of each chunk's last row.
void Session::Impl::output_head(int64_t n, float* out, bool all_rows) {
  const Weights& w = model.weights;
  const int64_t n_embd = config.n_embd;
  float* const xs = x.f32();
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
  block_norm(ctx, config, xs, w.output_norm, w.output_norm_b, rows, xn.f32());
  linear(ctx, w.output, xn.f32(), rows, out);
  if (config.final_softcap > 0.0f) vec_soft_cap(out, config.final_softcap, rows * config.n_vocab);
}

}  // namespace hearth
