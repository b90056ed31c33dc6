#include "device/standin/standin_device.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "core/trace.h"
#include "ops/attention_block.h"
#include "ops/activation.h"
#include "ops/vec.h"
#include "sparse/ffn.h"

namespace hearth::backend {
namespace {

AttentionParams attention_params(const ModelConfig& c, const DeviceSessionOptions& o) {
  return hearth::attention_params(c, o.n_ctx, o.kv_type);
}

// Activation buffers of one session in floats: the attention block's for n_batch tokens, the
// FFN's input, predictor input and output for n_ffn_batch tokens, and the RoPE table.
uint64_t scratch_floats(const ModelConfig& c, const DeviceSessionOptions& o) {
  const auto b = static_cast<uint64_t>(o.n_batch), fb = static_cast<uint64_t>(o.n_ffn_batch);
  const auto q_dim = static_cast<uint64_t>(c.n_head * c.head_dim);
  const auto kv = static_cast<uint64_t>(c.n_embd_kv());
  return b * (3 * c.n_embd + 2 * q_dim + 2 * kv) + fb * 3 * c.n_embd +
         static_cast<uint64_t>(o.n_ctx) * c.n_rot;
}

// The device runs decode-sized FFN groups of the session's mode, with no audit or observer.
sparse::FfnMode ffn_mode(const DeviceSessionOptions& o) {
  return sparse::FfnMode{o.mode, false, false, nullptr};
}

// Runs one job at a time on its own thread: the "device queue".
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = std::move(job);
      busy_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || job_; });
      if (stop_) return;
      auto job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      job();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

class StandinSession : public DeviceSession {
 public:
  StandinSession(StandinMemory& mem, const ModelConfig& c,
                 const std::vector<StandinDevice::Layer>& layers, const DeviceSessionOptions& o,
                 int n_threads)
      : config_(c), layers_(layers), options_(o), attn_(attention_params(c, o)), ctx_(n_threads) {
    const uint64_t kv = kv_cache_bytes(attn_);
    caches_.resize(layers.size());
    for (size_t il = 0; il < layers.size(); ++il) {
      if (!layers[il].attention) continue;
      for (int32_t s = 0; s < o.n_seq; ++s) {
        caches_[il].push_back(mem.alloc(kv, "a K cache"));
        caches_[il].push_back(mem.alloc(kv, "a V cache"));
      }
    }
    scratch_ = mem.alloc(scratch_floats(c, o) * sizeof(float), "activation buffers");
    workspace_ = mem.alloc(attention_workspace_bytes(attn_, ctx_.n_threads()),
                           "the attention workspace");
    s_.workspace = workspace_.data();
    float* f = scratch_.f32();
    const auto take = [&f](int64_t n) { float* p = f; f += n; return p; };
    const int64_t b = o.n_batch, q_dim = c.n_head * c.head_dim;
    x_ = take(b * c.n_embd);
    s_.xn = take(b * c.n_embd);
    s_.out = take(b * c.n_embd);
    s_.q = take(b * q_dim);
    s_.att = take(b * q_dim);
    s_.k = take(b * c.n_embd_kv());
    s_.v = take(b * c.n_embd_kv());
    ffn_x_ = take(o.n_ffn_batch * c.n_embd);
    ffn_p_ = take(o.n_ffn_batch * c.n_embd);
    ffn_out_ = take(o.n_ffn_batch * c.n_embd);
    // The rest is the RoPE table's share: it keeps its own vector, charged here.
    rope_ = RopeTable(rope_params(c, o.n_ctx), o.n_ctx);
    make_ffn_executors(mem);
  }

  void attention(int64_t il, int32_t seq, float* x, int64_t n, int64_t pos0) override {
    const StandinDevice::Layer& l = layers_[static_cast<size_t>(il)];
    if (!l.attention) fail("device (stand-in): layer ", il, "'s attention is not on the device");
    if (n > options_.n_batch || seq < 0 || seq >= options_.n_seq) {
      fail("device (stand-in): attention of ", n, " tokens of sequence ", seq, " is out of range");
    }
    const size_t bytes = static_cast<size_t>(n * config_.n_embd) * sizeof(float);
    std::memcpy(x_, x, bytes);
    void* k = caches_[static_cast<size_t>(il)][static_cast<size_t>(2 * seq)].data();
    void* v = caches_[static_cast<size_t>(il)][static_cast<size_t>(2 * seq + 1)].data();
    // The job captures only `this` (its arguments are members), so std::function keeps it
    // inline: no allocation per token.
    job_ = AttentionJob{&l.attn, k, v, n, pos0};
    worker_.submit([this] {
      TraceScope span(trace_, TraceRecorder::kDevice, "attention");
      const AttentionJob& j = job_;
      const AttentionChunk chunk{0, j.n, j.pos0, j.k, j.v};
      attention_residual(ctx_, config_, attn_, rope_, *j.weights, {&chunk, 1}, s_, x_, j.n);
    });
    worker_.wait();
    std::memcpy(x, x_, bytes);
  }

  void ffn_begin(int64_t il, const float* xn, const float* p, int64_t n) override {
    const size_t i = static_cast<size_t>(il);
    if (!executors_[i]) fail("device (stand-in): layer ", il, " has no FFN neurons on the device");
    const size_t bytes = static_cast<size_t>(n * config_.n_embd) * sizeof(float);
    std::memcpy(ffn_x_, xn, bytes);
    std::memcpy(ffn_p_, p, bytes);
    ffn_n_ = n;
    ffn_layer_ = i;
    ffn_stats_ = SparseStats{};
    worker_.submit([this] {
      TraceScope span(trace_, TraceRecorder::kDevice, "ffn (hot neurons)");
      executors_[ffn_layer_]->run(ctx_, weights_[ffn_layer_], ffn_x_, ffn_p_, ffn_n_, ffn_out_,
                                  ffn_stats_);
    });
  }

  void ffn_end(float* out, SparseStats& stats) override {
    worker_.wait();
    vec_add(ctx_.isa(), out, ffn_out_, ffn_n_ * config_.n_embd);
    stats.neurons_active += ffn_stats_.neurons_active;
    stats.weight_bytes += ffn_stats_.weight_bytes;
  }

  void set_trace(TraceRecorder* trace) override { trace_ = trace; }

 private:
  // One executor per layer with hot neurons (their counts differ), over the compact matrices.
  void make_ffn_executors(StandinMemory& mem) {
    const size_t n_layer = layers_.size();
    executors_.resize(n_layer);
    weights_.resize(n_layer);
    const bool predictor = options_.mode == SparseMode::Predictor;
    uint64_t bytes = 0;
    for (size_t il = 0; il < n_layer; ++il) {
      const StandinDevice::Layer& l = layers_[il];
      if (l.n_hot == 0) continue;
      if (predictor && !l.fc1.present()) {
        fail("device (stand-in): layer ", il, " has hot neurons but no predictor on the device; "
             "the placement was solved for another --sparse mode");
      }
      const sparse::FfnShape shape =
          sparse::ffn_shape(config_, l.n_hot, l.fc1.rows, options_.n_ffn_batch);
      executors_[il] = std::make_unique<sparse::FfnExecutor>(shape, ffn_mode(options_));
      bytes += executors_[il]->buffer_bytes();
      sparse::FfnWeights& w = weights_[il];
      w.gate = l.gate.present() ? &l.gate : nullptr;
      w.up = &l.up;
      w.down_t = &l.down_t;
      w.fc1 = &l.fc1;
      w.fc2 = &l.fc2;
      w.up_bias = l.up_bias;
      w.layer = static_cast<int32_t>(il);
      if (!options_.rules.empty()) {
        w.threshold = options_.rules[il].threshold;
        w.down_threshold = options_.rules[il].down_threshold;
      }
    }
    // The executors keep their buffers in host vectors; charge them as what they would take.
    if (bytes) executor_buffers_ = mem.alloc(bytes, "FFN buffers");
  }

  const ModelConfig& config_;
  const std::vector<StandinDevice::Layer>& layers_;
  DeviceSessionOptions options_;
  AttentionParams attn_;
  cpu::CpuContext ctx_;
  RopeTable rope_;
  std::vector<std::vector<StandinMemory::Block>> caches_;  // per layer: K, V per sequence
  StandinMemory::Block scratch_;
  StandinMemory::Block workspace_;
  StandinMemory::Block executor_buffers_;
  AttentionScratch s_;
  float* x_ = nullptr;
  float* ffn_x_ = nullptr;
  float* ffn_p_ = nullptr;
  float* ffn_out_ = nullptr;
  int64_t ffn_n_ = 0;
  size_t ffn_layer_ = 0;
  struct AttentionJob {
    const LayerWeights* weights;
    void* k;
    void* v;
    int64_t n;
    int64_t pos0;
  } job_{};
  SparseStats ffn_stats_;
  std::vector<std::unique_ptr<sparse::FfnExecutor>> executors_;
  std::vector<sparse::FfnWeights> weights_;
  TraceRecorder* trace_ = nullptr;
  Worker worker_;  // last: joined first, before the buffers it uses go away
};

}  // namespace

StandinDevice::StandinDevice(uint64_t capacity, int n_threads)
    : memory_(capacity), n_threads_(std::max(1, n_threads)) {}
StandinDevice::~StandinDevice() = default;

std::string StandinDevice::name() const { return "CPU stand-in device"; }

MemoryInfo StandinDevice::memory() const {
  return MemoryInfo{memory_.capacity(), memory_.capacity() - memory_.allocated()};
}

uint64_t StandinDevice::session_scratch_bytes(const ModelConfig& config,
                                              const DeviceSessionOptions& options) const {
  const AttentionParams attn = attention_params(config, options);
  // The executors' buffers for layers whose n_ff neurons were all hot: the placement is solved
  // before the hot counts are known, so every layer is reserved in full.
  const uint64_t per_layer = sparse::FfnScratch::bytes(
      sparse::ffn_shape(config, config.n_ff, options.predictor_width, options.n_ffn_batch),
      ffn_mode(options));
  return scratch_floats(config, options) * sizeof(float) +
         attention_workspace_bytes(attn, n_threads_) + per_layer * config.n_layer;
}

void StandinDevice::load(const DeviceModel& model) {
  if (!layers_.empty()) fail("device (stand-in): a model is loaded already");
  config_ = model.config;
  std::vector<Layer> layers(model.layers.size());
  for (size_t il = 0; il < model.layers.size(); ++il) {
    const DeviceLayer& d = model.layers[il];
    const LayerWeights& w = *d.weights;
    Layer& l = layers[il];
    const auto copy_vector = [&](const float* v, const int32_t* ids, int64_t n, const char* what) {
      l.vectors.push_back(memory_.alloc(static_cast<uint64_t>(n) * sizeof(float), what));
      float* dst = l.vectors.back().f32();
      for (int64_t j = 0; j < n; ++j) dst[j] = v[ids ? ids[j] : j];
      return static_cast<const float*>(dst);
    };
    const auto copy = [&](const Matrix& m, const int32_t* ids, int64_t k, const char* what) {
      l.matrices.push_back(copy_rows(memory_, m, ids, k, what));
      return l.matrices.back().view;
    };
    if (d.attention) {
      l.attention = true;
      l.attn.attn_norm = copy_vector(w.attn_norm, nullptr, config_.n_embd, "attn_norm");
      l.attn.wq = copy(w.wq, nullptr, 0, "attn_q");
      l.attn.wk = copy(w.wk, nullptr, 0, "attn_k");
      l.attn.wv = copy(w.wv, nullptr, 0, "attn_v");
      l.attn.wo = copy(w.wo, nullptr, 0, "attn_output");
    }
    if (d.hot.empty()) continue;
    const int32_t* ids = d.hot.data();
    const auto k = static_cast<int64_t>(d.hot.size());
    l.n_hot = k;
    if (w.ffn_gate.present()) l.gate = copy(w.ffn_gate, ids, k, "ffn_gate (hot rows)");
    l.up = copy(w.ffn_up, ids, k, "ffn_up (hot rows)");
    l.down_t = copy(*d.down_t, ids, k, "ffn_down_t (hot rows)");
    if (w.ffn_up_b) l.up_bias = copy_vector(w.ffn_up_b, ids, k, "ffn_up bias (hot)");
    if (d.predictor) {
      l.fc1 = copy(w.fc1, nullptr, 0, "fc1");
      l.fc2 = copy(w.fc2, ids, k, "fc2 (hot rows)");
    }
  }
  layers_ = std::move(layers);  // on an error above, `layers` frees what it took
}

std::unique_ptr<DeviceSession> StandinDevice::open_session(const DeviceSessionOptions& options) {
  return std::make_unique<StandinSession>(memory_, config_, layers_, options, n_threads_);
}

}  // namespace hearth::backend
