// The session's side of hybrid execution: which layers' attention and FFN neurons the model's
// device holds (model_device.cc), and running each layer's parts on both sides at once.
#include <algorithm>

#include "core/error.h"
#include "ops/linear.h"
#include "model/session_impl.h"
#include "ops/vec.h"

namespace hearth {

void Session::Impl::open_device(const SessionOptions& o) {
  if (o.trace) trace_ = std::make_unique<TraceRecorder>();
  if (!model_.device) return;
  const backend::DeviceSessionOptions& placed = model_.device_session;
  const int32_t n_ctx = kv_.n_ctx(), n_seq = kv_.n_seq();
  if (n_ctx > placed.n_ctx) {
    fail("this session's context (", n_ctx, " tokens) is larger than the one the model was placed "
         "on the device for (", placed.n_ctx, "); load it with that context");
  }
  if (o.ffn_observer) fail("an FFN observer needs a CPU-only model (--device none)");
  if (o.matmul_observer) fail("a matmul observer needs a CPU-only model (--device none)");
  // The placement left room on the device for exactly this much; more would overrun the budget.
  if (n_batch_ > placed.n_batch) {
    fail("this session's batch (", n_batch_, " tokens) is larger than the one the model was placed "
         "on the device for (", placed.n_batch, ")");
  }
  if (o.kv_type != placed.kv_type) {
    fail("this session's KV cache type differs from the one the model was placed on the device "
         "for (--kv-type)");
  }
  backend::DeviceSessionOptions so = placed;
  so.n_ctx = n_ctx;
  if (n_seq > placed.n_seq) {
    fail("this session decodes ", n_seq, " sequences, but the model was placed on the device for ",
         placed.n_seq);
  }
  so.n_seq = n_seq;
  so.n_batch = n_batch_;
  so.kv_type = o.kv_type;
  so.mode = sparsity_.mode();
  so.rules.clear();
  for (const sparse::FfnWeights& w : ffn_weights_) {
    so.rules.push_back(sparse::layer_rule(so.mode, w));
  }
  device_ = model_.device->open_session(so);
  device_->set_trace(trace_.get());
  ffn_cold_ = ffn_weights_;
  for (size_t il = 0; il < ffn_cold_.size(); ++il) {
    const std::vector<int32_t>& cold = model_.cold[il];
    ffn_cold_[il].neurons = cold.data();
    ffn_cold_[il].n_neurons = static_cast<int64_t>(cold.size());
  }
}

void Session::Impl::run_attention(size_t il, int64_t n) {
  const int64_t n_embd = config_.n_embd;
  float* const xs = buf_.x.f32();
  if (device_ && model_.device_attention[il]) {
    TraceScope span(trace_.get(), TraceRecorder::kHost, "wait: attention on the device");
    for (const PassLayout::Chunk& ch : pass_.chunks()) {
      device_->attention(static_cast<int64_t>(il), ch.seq, xs + ch.row0 * n_embd, ch.n, ch.pos0);
    }
    return;
  }
  TraceScope span(trace_.get(), TraceRecorder::kHost, "attention");
  attention_residual(ctx_, config_, layer_attention(attn_, config_, static_cast<int64_t>(il)),
                     layer_rope(il), model_.weights.layers[il], layer_chunks(il), attn_scratch_, xs,
                     n, sparsity_.attention(il, stats_));
}

void Session::Impl::run_ffn(size_t il, const float* xn, const float* p, int64_t n) {
  float* const out = buf_.ffn_out.f32();
  const bool split = device_ && model_.device_hot[il] > 0;
  const std::span<const sparse::FfnChunk> chunks = pass_.ffn_chunks();
  if (split && n <= sparse::kMaxSparseBatch && !pass_.any_dense()) {
    split_ffn(il, xn, p, n, out);
    return;
  }
  if (!split || sparsity_.mode() == SparseMode::Dense) {
    // Prompts stay on the host: its matrix-matrix kernels read every weight anyway, and the
    // device's FFN part is sized for decode steps.
    TraceScope span(trace_.get(), TraceRecorder::kHost, "ffn");
    ffn_.run(ctx_, ffn_weights_[il], xn, p, n, out, stats_);
    return;
  }
  // The tokens the mode decides must come out as decode steps would (batch invariance): each
  // token's hot neurons summed on the device and its cold ones on the host, so they go through
  // the split in groups the device's FFN is sized for (a token's result does not depend on the
  // group it shares, as in a host-only session). Chunks that run dense (dense prompts: marked
  // ones, and long ones) stay on the host.
  const int64_t n_embd = config_.n_embd;
  const auto on_host = [this](const sparse::FfnChunk& c) {
    return c.dense || (!sparsity_.sparse_prompt() && c.rows > sparse::kMaxSparseBatch);
  };
  int64_t r0 = 0;
  for (size_t c = 0; c < chunks.size();) {
    const size_t c0 = c;
    const bool host = on_host(chunks[c]);
    int64_t rows = 0;
    while (c < chunks.size() && on_host(chunks[c]) == host) rows += chunks[c++].rows;
    if (host) {
      TraceScope span(trace_.get(), TraceRecorder::kHost, "ffn");
      ffn_.set_chunks(chunks.subspan(c0, c - c0));
      ffn_.run(ctx_, ffn_weights_[il], xn + r0 * n_embd, p + r0 * n_embd, rows, out + r0 * n_embd,
               stats_);
    } else {
      for (int64_t t0 = r0; t0 < r0 + rows; t0 += sparse::kMaxSparseBatch) {
        const sparse::FfnChunk group{std::min(sparse::kMaxSparseBatch, r0 + rows - t0), false};
        ffn_.set_chunks({&group, 1});
        split_ffn(il, xn + t0 * n_embd, p + t0 * n_embd, group.rows, out + t0 * n_embd);
      }
    }
    r0 += rows;
  }
  ffn_.set_chunks(chunks);
}

void Session::Impl::split_ffn(size_t il, const float* xn, const float* p, int64_t n, float* out) {
  device_->ffn_begin(static_cast<int64_t>(il), xn, p, n);
  if (model_.device_hot[il] < config_.n_ff) {
    TraceScope span(trace_.get(), TraceRecorder::kHost, "ffn (cold neurons)");
    ffn_.run(ctx_, ffn_cold_[il], xn, p, n, out, stats_);
  } else {
    // Every neuron is on the device: the host only counts them and adds the bias.
    std::fill(out, out + n * config_.n_embd, 0.0f);
    add_bias(ctx_.isa(), out, ffn_weights_[il].down_bias, n, config_.n_embd);
    stats_.neurons_total += static_cast<uint64_t>(n * config_.n_ff);
  }
  TraceScope span(trace_.get(), TraceRecorder::kHost, "wait: ffn on the device");
  device_->ffn_end(out, stats_);
}

}  // namespace hearth
