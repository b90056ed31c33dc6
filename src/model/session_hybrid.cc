// The session's side of hybrid execution: which layers' attention and FFN neurons the model's
// device holds (model_device.cc), and running each layer's parts on both sides at once.
#include <algorithm>

#include "core/error.h"
#include "ops/linear.h"
#include "model/session_impl.h"
#include "ops/vec.h"

namespace hearth {

void Session::Impl::open_device(const SessionOptions& o) {
  if (o.trace) trace = std::make_unique<TraceRecorder>();
  if (!model.device) return;
  const backend::DeviceSessionOptions& placed = model.device_session;
  if (n_ctx > placed.n_ctx) {
    fail("this session's context (", n_ctx, " tokens) is larger than the one the model was placed "
         "on the device for (", placed.n_ctx, "); load it with that context");
  }
  if (o.ffn_observer) fail("an FFN observer needs a CPU-only model (--device none)");
  if (o.matmul_observer) fail("a matmul observer needs a CPU-only model (--device none)");
  // The placement left room on the device for exactly this much; more would overrun the budget.
  if (n_batch > placed.n_batch) {
    fail("this session's batch (", n_batch, " tokens) is larger than the one the model was placed "
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
  so.n_batch = n_batch;
  so.kv_type = o.kv_type;
  so.mode = sparse_mode;
  so.rules.clear();
  for (const sparse::FfnWeights& w : ffn_weights) {
    so.rules.push_back(sparse::layer_rule(sparse_mode, w));
  }
  device = model.device->open_session(so);
  device->set_trace(trace.get());
  ffn_cold = ffn_weights;
  for (size_t il = 0; il < ffn_cold.size(); ++il) {
    const std::vector<int32_t>& cold = model.cold[il];
    ffn_cold[il].neurons = cold.data();
    ffn_cold[il].n_neurons = static_cast<int64_t>(cold.size());
  }
}

void Session::Impl::run_attention(size_t il, int64_t n) {
  const int64_t n_embd = config.n_embd;
  float* const xs = x.f32();
  if (device && model.device_attention[il]) {
    TraceScope span(trace.get(), TraceRecorder::kHost, "wait: attention on the device");
    for (size_t i = 0; i < n_chunks; ++i) {
      const Chunk& ch = chunks[i];
      device->attention(static_cast<int64_t>(il), ch.seq, xs + ch.row0 * n_embd, ch.n, ch.pos0);
    }
    return;
  }
  TraceScope span(trace.get(), TraceRecorder::kHost, "attention");
  attention_residual(ctx, config, layer_attention(attn, config, static_cast<int64_t>(il)),
                     layer_rope(il), model.weights.layers[il], layer_chunks(il), attn_scratch, xs,
                     n, attention_thresholds(il, n));
}

void Session::Impl::run_ffn(size_t il, const float* xn, const float* p, int64_t n) {
  float* const out = ffn_out.f32();
  const bool split = device && model.device_hot[il] > 0;
  if (split && n <= sparse::kMaxSparseBatch) {
    split_ffn(il, xn, p, n, out);
    return;
  }
  if (split && sparse_mode != SparseMode::Dense && sparse_prompt) {
    // A sparse prompt's tokens must come out as decode steps would (batch invariance): each
    // token's hot neurons summed on the device and its cold ones on the host, so the batch goes
    // through the split in groups the device's FFN is sized for. A token's result does not
    // depend on the group it shares, as in a host-only session.
    const int64_t n_embd = config.n_embd;
    for (int64_t t0 = 0; t0 < n; t0 += sparse::kMaxSparseBatch) {
      const int64_t group = std::min(sparse::kMaxSparseBatch, n - t0);
      ffn.set_chunks({&group, 1});
      split_ffn(il, xn + t0 * n_embd, p + t0 * n_embd, group, out + t0 * n_embd);
    }
    ffn.set_chunks({chunk_rows.data(), n_chunks});
    return;
  }
  // Dense prompts stay on the host: its matrix-matrix kernels read every weight anyway, and the
  // device's FFN part is sized for decode steps.
  TraceScope span(trace.get(), TraceRecorder::kHost, "ffn");
  ffn.run(ctx, ffn_weights[il], xn, p, n, out, stats);
}

void Session::Impl::split_ffn(size_t il, const float* xn, const float* p, int64_t n, float* out) {
  device->ffn_begin(static_cast<int64_t>(il), xn, p, n);
  if (model.device_hot[il] < config.n_ff) {
    TraceScope span(trace.get(), TraceRecorder::kHost, "ffn (cold neurons)");
    ffn.run(ctx, ffn_cold[il], xn, p, n, out, stats);
  } else {
    // Every neuron is on the device: the host only counts them and adds the bias.
    std::fill(out, out + n * config.n_embd, 0.0f);
    add_bias(ctx.isa(), out, ffn_weights[il].down_bias, n, config.n_embd);
    stats.neurons_total += static_cast<uint64_t>(n * config.n_ff);
  }
  TraceScope span(trace.get(), TraceRecorder::kHost, "wait: ffn on the device");
  device->ffn_end(out, stats);
}

}  // namespace hearth
