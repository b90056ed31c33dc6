#include "device/cuda/cuda_session.h"
#include "device/cuda/cublas_api.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "device/cuda/attention.cuh"
#include "device/cuda/cuda_check.h"
#include "device/cuda/norm.cuh"
#include "device/cuda/rope.cuh"
#include "core/error.h"
#include "core/trace.h"
#include "ops/attention_block.h"
#include "ops/rope.h"

namespace hearth::gpu {
namespace {

bool has_rope(const ModelConfig& c) { return c.rope_type != RopeType::None && c.n_rot > 0; }

// The session's buffer sizes, with its device made current first: every allocation and stream of
// the constructor belongs to it.
SessionSizes sizes_on_device(const DeviceAllocator& alloc, const DeviceModelData& model,
                             const backend::DeviceSessionOptions& options) {
  check(cudaSetDevice(alloc.device()), "selecting the CUDA device");
  return session_sizes(model.config, options, model.extents);
}

}  // namespace

CudaDeviceSession::CudaDeviceSession(DeviceAllocator& alloc, const DeviceModelData& model,
                                     const backend::DeviceSessionOptions& options)
    : alloc_(alloc),
      model_(model),
      options_(options),
      sizes_(sizes_on_device(alloc, model, options)),
      buf_(alloc, sizes_) {
  // The stream first: everything below is ordered on it. (A non-blocking stream does not wait for
  // work on the legacy default stream, so a plain cudaMemset could still be running when the
  // first kv_store writes the cache.)
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
  stream_.reset(stream);
  cudaEvent_t start = nullptr, done = nullptr;
  check(cudaEventCreate(&start), "creating an event");
  ffn_start_.reset(start);
  check(cudaEventCreate(&done), "creating an event");
  ffn_done_.reset(done);

  const ModelConfig& c = model_.config;
  const size_t io = static_cast<size_t>(options.n_ffn_batch * c.n_embd) * sizeof(float);
  for (size_t il = 0; il < model_.layers.size(); ++il) {
    const DeviceLayerWeights& l = model_.layers[il];
    if (options.mode == SparseMode::Predictor && l.n_hot > 0 && !l.predictor) {
      fail("layer ", il,
           " has hot neurons on the CUDA device but not its predictor, which "
           "--sparse predictor needs");
    }
    k_cache_.emplace_back();
    v_cache_.emplace_back();
    if (!l.attention) continue;
    k_cache_.back() = DeviceBuffer(alloc, sizes_.kv_layer, str_cat("layer ", il, " K cache"));
    v_cache_.back() = DeviceBuffer(alloc, sizes_.kv_layer, str_cat("layer ", il, " V cache"));
    // Positions are written before they are read; zeros make a misuse visible, not garbage.
    check(cudaMemsetAsync(k_cache_.back().get(), 0, sizes_.kv_layer, stream), "clearing a K cache");
    check(cudaMemsetAsync(v_cache_.back().get(), 0, sizes_.kv_layer, stream), "clearing a V cache");
  }
  if (model_.extents.attention) {
    pinned_x_ = PinnedBuffer(sizes_.x, "staging hidden states");
  }
  if (model_.extents.k_max > 0) {
    pinned_ffn_in_ = PinnedBuffer(2 * io, "staging FFN inputs");
    pinned_ffn_out_ = PinnedBuffer(io, "staging FFN outputs");
    pinned_counters_ = PinnedBuffer(sizeof(FfnCounters), "staging FFN counters");
  }

  if (sizes_.cublas_workspace > 0) {
    cublasHandle_t handle = nullptr;
    check_cublas(cublas().create(&handle), "creating a cuBLAS handle");
    cublas_.reset(handle);
    // cublasSetStream resets the workspace, so the workspace comes second.
    check_cublas(cublas().set_stream(handle, stream), "binding cuBLAS to the session's stream");
    check_cublas(cublas().set_workspace(handle, buf_.cublas_workspace.get(), sizes_.cublas_workspace),
                 "giving cuBLAS its workspace");
    gemm_ = GemmContext{handle, buf_.gemm_act.get(), sizes_.gemm_act, buf_.gemm_weights.get(),
                        sizes_.gemm_weights};
  }
  upload_tables();
  check(cudaStreamSynchronize(stream), "setting up the session");
}

CudaDeviceSession::~CudaDeviceSession() {
  // Work still queued (an ffn_begin without its ffn_end) must not outlive the buffers it uses.
  if (stream_) cudaStreamSynchronize(stream_.get());
}

// The RoPE cos/sin table, computed by the host's RopeTable so the angles match the CPU's bit for
// bit, and the dense FFN's list 0, 1, 2, ... (Copies from pageable memory return once the source
// has been read, so the host vectors may go at the end of this function.)
void CudaDeviceSession::upload_tables() {
  const ModelConfig& c = model_.config;
  if (model_.extents.attention && has_rope(c)) {
    const RopeTable table(rope_params(c, options_.n_ctx), options_.n_ctx);
    check(cudaMemcpyAsync(buf_.rope.get(), table.cos_sin(0), sizes_.rope, cudaMemcpyHostToDevice,
                          stream_.get()),
          "copying the RoPE table");
  }
  if (model_.extents.k_max > 0) {
    std::vector<int32_t> iota(static_cast<size_t>(model_.extents.k_max));
    std::iota(iota.begin(), iota.end(), 0);
    check(cudaMemcpyAsync(buf_.ffn_iota.get(), iota.data(), sizes_.ffn_idx, cudaMemcpyHostToDevice,
                          stream_.get()),
          "copying the hot neuron list");
  }
}

void CudaDeviceSession::use_device() const {
  check(cudaSetDevice(alloc_.device()), "selecting the CUDA device");
}

const DeviceLayerWeights& CudaDeviceSession::layer(int64_t il) const {
  if (il < 0 || il >= static_cast<int64_t>(model_.layers.size())) {
    fail("layer ", il, " is out of range for the CUDA device");
  }
  return model_.layers[static_cast<size_t>(il)];
}

void CudaDeviceSession::attention(int64_t il, int32_t seq, float* x, int64_t n, int64_t pos0) {
  const ModelConfig& c = model_.config;
  const DeviceLayerWeights& l = layer(il);
  if (!l.attention) fail("layer ", il, "'s attention is not on the CUDA device");
  if (n < 0 || n > options_.n_batch)
    fail(n, " tokens exceed the device batch of ", options_.n_batch);
  if (seq < 0 || seq >= options_.n_seq)
    fail("sequence ", seq, " is out of range [0, ", options_.n_seq, ")");
  if (pos0 < 0 || pos0 + n > options_.n_ctx) {
    fail("positions ", pos0, "..", pos0 + n, " do not fit the device context of ", options_.n_ctx);
  }
  if (pending_layer_ >= 0) fail("internal: attention() between ffn_begin() and ffn_end()");
  if (n == 0) return;
  // Synchronous: its host-side wall time (transfers included) is the device's span.
  TraceScope span(trace_, TraceRecorder::kDevice, "attention");
  use_device();
  cudaStream_t s = stream_.get();
  const int n_head = static_cast<int>(c.n_head), n_head_kv = static_cast<int>(c.n_head_kv);
  const int head_dim = static_cast<int>(c.head_dim);
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_embd_kv();
  const size_t bytes = static_cast<size_t>(n * c.n_embd) * sizeof(float);
  float* const dx = buf_.x.as<float>();
  float* const dxn = buf_.xn.as<float>();
  float* const dq = buf_.q.as<float>();
  float* const dk = buf_.k.as<float>();
  float* const dv = buf_.v.as<float>();
  float* const datt = buf_.att.as<float>();

  std::memcpy(pinned_x_.get(), x, bytes);
  check(cudaMemcpyAsync(dx, pinned_x_.get(), bytes, cudaMemcpyHostToDevice, s),
        "copying hidden states to the device");
  launch_rms_norm(dx, l.attn_norm.as<float>(), c.norm_eps, n, c.n_embd, dxn, s);
  linear(gemm_, l.wq.view(), dxn, n, dq, false, s);
  linear(gemm_, l.wk.view(), dxn, n, dk, false, s);
  linear(gemm_, l.wv.view(), dxn, n, dv, false, s);
  if (has_rope(c)) {
    const bool neox = c.rope_type == RopeType::Neox;
    const float* table = buf_.rope.as<float>();
    const int n_rot = static_cast<int>(c.n_rot);
    launch_rope(dq, n, n_head, head_dim, q_dim, table, n_rot, neox, pos0, s);
    launch_rope(dk, n, n_head_kv, head_dim, kv_dim, table, n_rot, neox, pos0, s);
  }
  const bool f16 = options_.kv_type == KvType::F16;
  const uint64_t seq_offset = sizes_.kv_layer / static_cast<uint64_t>(options_.n_seq) * seq;
  void* const kc = k_cache_[static_cast<size_t>(il)].as<uint8_t>() + seq_offset;
  void* const vc = v_cache_[static_cast<size_t>(il)].as<uint8_t>() + seq_offset;
  launch_kv_store(f16, dk, n, kv_dim, pos0, kc, s);
  launch_kv_store(f16, dv, n, kv_dim, pos0, vc, s);
  const AttentionShape shape{n_head, n_head_kv, head_dim,
                             1.0f / std::sqrt(static_cast<float>(head_dim))};
  launch_attention(shape, f16, kc, vc, dq, pos0, n, datt, s);
  linear(gemm_, l.wo.view(), datt, n, dx, true, s);  // the residual: x += wo · attention
  check(cudaMemcpyAsync(pinned_x_.get(), dx, bytes, cudaMemcpyDeviceToHost, s),
        "copying hidden states from the device");
  check(cudaStreamSynchronize(s), "running the attention block");
  std::memcpy(x, pinned_x_.get(), bytes);
}

HotFfnRule CudaDeviceSession::rule(int64_t il) const {
  const auto i = static_cast<size_t>(il);
  HotFfnRule r;
  if (options_.rules.empty()) {
    r.layer.mode = options_.mode;
  } else {
    r.layer = options_.rules[i];
  }
  r.act = model_.config.ffn_act;
  r.up_relu = model_.config.ffn_up_relu;
  return r;
}

HotFfnBuffers CudaDeviceSession::ffn_buffers() const {
  HotFfnBuffers b;
  b.xn = buf_.ffn_xn.as<float>();
  b.p = buf_.ffn_p.as<float>();
  b.out = buf_.ffn_out.as<float>();
  b.f = buf_.ffn_f.as<float>();
  b.u = buf_.ffn_u.as<float>();
  b.g = buf_.ffn_g.as<float>();
  b.hidden = buf_.ffn_h.as<float>();
  b.idx = buf_.ffn_idx.as<int32_t>();
  b.iota = buf_.ffn_iota.as<int32_t>();
  b.partial = buf_.ffn_partial.as<float>();
  b.counters = buf_.counters.as<FfnCounters>();
  b.ld = model_.extents.k_max;
  return b;
}

void CudaDeviceSession::ffn_begin(int64_t il, const float* xn, const float* p, int64_t n) {
  const DeviceLayerWeights& l = layer(il);
  if (pending_layer_ >= 0) fail("internal: ffn_begin() twice without ffn_end()");
  if (n < 0 || n > options_.n_ffn_batch) {
    fail(n, " tokens exceed the device FFN batch of ", options_.n_ffn_batch);
  }
  if (l.n_hot > 0 && n > 0) {
    use_device();
    cudaStream_t s = stream_.get();
    const size_t bytes = static_cast<size_t>(n * model_.config.n_embd) * sizeof(float);
    auto* const in = pinned_ffn_in_.as<uint8_t>();
    std::memcpy(in, xn, bytes);
    check(cudaMemcpyAsync(buf_.ffn_xn.get(), in, bytes, cudaMemcpyHostToDevice, s),
          "copying the FFN input to the device");
    if (options_.mode == SparseMode::Predictor) {
      uint8_t* const in_p = in + pinned_ffn_in_.bytes() / 2;
      std::memcpy(in_p, p, bytes);
      check(cudaMemcpyAsync(buf_.ffn_p.get(), in_p, bytes, cudaMemcpyHostToDevice, s),
            "copying the predictor input to the device");
    }
    check(cudaEventRecord(ffn_start_.get(), s), "recording an event");
    // The stream is idle here (attention() and ffn_end() synchronise), so the device starts about
    // now; ffn_end() adds the span's length measured on the device.
    if (trace_) trace_begin_us_ = trace_->now_us();
    enqueue_hot_ffn(l, rule(il), ffn_buffers(), n, s);
    check(cudaMemcpyAsync(pinned_ffn_out_.get(), buf_.ffn_out.get(), bytes, cudaMemcpyDeviceToHost,
                          s),
          "copying the FFN output from the device");
    check(cudaMemcpyAsync(pinned_counters_.get(), buf_.counters.get(), sizeof(FfnCounters),
                          cudaMemcpyDeviceToHost, s),
          "copying the FFN counters from the device");
    check(cudaEventRecord(ffn_done_.get(), s), "recording an event");
  }
  pending_layer_ = il;
  pending_n_ = n;
}

void CudaDeviceSession::ffn_end(float* out, SparseStats& stats) {
  if (pending_layer_ < 0) fail("internal: ffn_end() without ffn_begin()");
  const DeviceLayerWeights& l = layer(pending_layer_);
  const HotFfnRule r = rule(pending_layer_);
  const int64_t n = pending_n_;
  pending_layer_ = -1;
  if (l.n_hot == 0 || n == 0) return;
  use_device();
  check(cudaEventSynchronize(ffn_done_.get()), "running the hot FFN");
  if (trace_) {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, ffn_start_.get(), ffn_done_.get()), "timing the hot FFN");
    trace_->add(TraceRecorder::kDevice, "ffn (hot neurons)", trace_begin_us_,
                trace_begin_us_ + 1000.0 * ms);
  }
  const float* result = pinned_ffn_out_.as<float>();
  const int64_t count = n * model_.config.n_embd;
  for (int64_t i = 0; i < count; ++i) out[i] += result[i];
  count_hot_ffn(l, r, *pinned_counters_.as<FfnCounters>(), n, stats);
}

}  // namespace hearth::gpu
