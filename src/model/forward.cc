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
  const Matrix& embd = model_.weights.token_embd;
  const int64_t n_embd = config_.n_embd;
  const int64_t n = pass_.plan(batch, kv_, !prompt_matches_decode());
  int64_t row = 0;
  for (const SeqTokens& b : batch) {
    for (const int32_t token : b.tokens) {
      dequantize_row(embd.type, embd.row(token), buf_.x.f32() + row++ * n_embd, n_embd);
    }
  }
  // Every attention and output weight, less what input-sparse products skip (attention_block).
  stats_.weight_bytes += non_ffn_bytes_;
  if (config_.block.scaled_embd) {
    vec_scale(ctx_.isa(), buf_.x.f32(), std::sqrt(static_cast<float>(n_embd)), n * n_embd);
  }
  if (config_.block.learned_positions) add_positions(n);
  ffn_.set_chunks(pass_.ffn_chunks());
  for (size_t il = 0; il < model_.weights.layers.size(); ++il) {
    if (config_.block.parallel) {
      parallel_layer(il, n);
    } else {
      sequential_layer(il, n);
    }
  }
  output_head(n, out, all_rows);
  for (const PassLayout::Chunk& c : pass_.chunks()) kv_.advance(c.seq, c.n);
  stats_.tokens += static_cast<uint64_t>(n);
}

void Session::Impl::add_positions(int64_t n) {
  const Weights& w = model_.weights;
  const int64_t n_embd = config_.n_embd, offset = config_.block.pos_offset;
  // The position table ends the context: there is nothing to read past its last row.
  const int64_t n_pos = w.pos_embd.rows - offset;
  float* const row = buf_.pos_row.f32();
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = pass_.position(t);
    if (pos >= n_pos) {
      fail("position ", pos, " is past the ", n_pos, " learned positions of this ", config_.arch,
           " model; use a context of at most ", n_pos, " tokens");
    }
    dequantize_row(w.pos_embd.type, w.pos_embd.row(pos + offset), row, n_embd);
    vec_add(ctx_.isa(), buf_.x.f32() + t * n_embd, row, n_embd);
  }
}

void Session::Impl::sequential_layer(size_t il, int64_t n) {
  const LayerWeights& l = model_.weights.layers[il];
  float* const xs = buf_.x.f32();
  run_attention(il, n);
  block_norm(ctx_, config_, xs, l.ffn_norm, l.ffn_norm_b, n, buf_.xn.f32());
  run_ffn(il, buf_.xn.f32(), xs, n);
  float* const f = buf_.ffn_out.f32();
  if (l.ffn_post_norm) block_norm(ctx_, config_, f, l.ffn_post_norm, nullptr, n, f);
  vec_add(ctx_.isa(), xs, f, n * config_.n_embd);
}

void Session::Impl::parallel_layer(size_t il, int64_t n) {
  const LayerWeights& l = model_.weights.layers[il];
  float* const xs = buf_.x.f32();
  float* const h = buf_.xn.f32();
  block_norm(ctx_, config_, xs, l.attn_norm, l.attn_norm_b, n, h);
  const float* a = h;
  if (l.attn_norm_2) {
    block_norm(ctx_, config_, xs, l.attn_norm_2, l.attn_norm_2_b, n, buf_.xa.f32());
    a = buf_.xa.f32();
  }
  TraceScope span(trace_.get(), TraceRecorder::kHost, "attention");
  attention_block(ctx_, config_, layer_attention(attn_, config_, static_cast<int64_t>(il)),
                  layer_rope(il), l, layer_chunks(il), attn_scratch_, a, n, buf_.attn_out.f32(),
                  sparsity_.attention(il, stats_));
  run_ffn(il, h, xs, n);
  // x += (attention + ffn), summed in llama.cpp's order.
  float* const ao = buf_.attn_out.f32();
  vec_add(ctx_.isa(), ao, buf_.ffn_out.f32(), n * config_.n_embd);
  vec_add(ctx_.isa(), xs, ao, n * config_.n_embd);
}

const RopeTable& Session::Impl::layer_rope(size_t il) const {
  const bool own =
      config_.rope_freq_base_swa > 0.0f && config_.sliding_layer(static_cast<int64_t>(il));
  return own ? rope_swa_ : rope_;
}

std::span<const AttentionChunk> Session::Impl::layer_chunks(size_t il) {
  return pass_.attention_chunks(il, kv_, sparsity_.input_sparse_rows());
}

// logits = output · norm(x): of every row into out when all_rows, else of each chunk's last row.
void Session::Impl::output_head(int64_t n, float* out, bool all_rows) {
  const Weights& w = model_.weights;
  const int64_t n_embd = config_.n_embd;
  float* const xs = buf_.x.f32();
  int64_t rows = n;
  if (!all_rows) {
    // The chunks' last rows to the front of x; row i comes from a row at or after i, so moving
    // them in order never overwrites one still to be read.
    const std::span<const PassLayout::Chunk> chunks = pass_.chunks();
    rows = static_cast<int64_t>(chunks.size());
    for (int64_t i = 0; i < rows; ++i) {
      const PassLayout::Chunk& ch = chunks[static_cast<size_t>(i)];
      const int64_t last = ch.row0 + ch.n - 1;
      if (last != i) std::memcpy(xs + i * n_embd, xs + last * n_embd, n_embd * sizeof(float));
    }
  }
  block_norm(ctx_, config_, xs, w.output_norm, w.output_norm_b, rows, buf_.xn.f32());
  linear(ctx_, w.output, buf_.xn.f32(), rows, out);
  if (config_.final_softcap > 0.0f) {
    vec_soft_cap(out, config_.final_softcap, rows * config_.n_vocab);
  }
}

}  // namespace hearth
