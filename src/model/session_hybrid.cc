// The session's side of hybrid execution: which layers' attention and FFN neurons the model's
// device holds (model_device.cc), and running each layer's parts on both sides at once.
#include <algorithm>

#include "core/error.h"
#include "model/linear.h"
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
  backend::DeviceSessionOptions so = placed;
  so.n_ctx = n_ctx;
  so.n_seq = 1;
  so.n_batch = n_batch;
  so.kv_type = o.kv_type;
  so.mode = sparse_mode;
  so.thresholds.clear();
  so.down_thresholds.clear();
  for (const sparse::FfnWeights& w : ffn_weights) {
    so.thresholds.push_back(w.threshold);
    so.down_thresholds.push_back(w.down_threshold);
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

void Session::Impl::run_attention(size_t il, int64_t n, int64_t pos0) {
  if (device && model.device_attention[il]) {
    TraceScope span(trace.get(), TraceRecorder::kHost, "wait: attention on the device");
    device->attention(static_cast<int64_t>(il), 0, x.f32(), n, pos0);
    return;
  }
  TraceScope span(trace.get(), TraceRecorder::kHost, "attention");
  llama_attention_block(ctx, config, attn, rope, model.weights.layers[il], k_cache[il].data(),
                        v_cache[il].data(), attn_scratch, x.f32(), n, pos0);
}

void Session::Impl::run_ffn(size_t il, const float* xn, const float* p, int64_t n) {
  float* const out = ffn_out.f32();
  // Prompt-sized batches stay on the host: its dense matrix-matrix kernels read every weight
  // anyway, and the device's FFN part is sized for decode steps.
  const bool on_device = device && model.device_hot[il] > 0 && n <= sparse::kMaxSparseBatch;
  if (!on_device) {
    TraceScope span(trace.get(), TraceRecorder::kHost, "ffn");
    ffn.run(ctx, ffn_weights[il], xn, p, n, out, stats);
    return;
  }
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
