// A compute device that holds part of a model and runs that part while the CPU runs the rest
// (DESIGN.md sections 2 and 5): the attention of the layers placed on it, and the FFN's *hot*
// neurons. The CPU computes the cold neurons of the same layer at the same time; the two partial
// FFN outputs are summed on the host. Only activation vectors cross between the two.
//
// Implementations:
//   device/standin/  a second CPU backend with its own threads and a memory budget, so that the
//                     placement, the split and the merge are tested without a GPU (CI);
//   device/cuda/     NVIDIA GPUs (built with -DHEARTH_CUDA=ON).
// Callers see only this header; no CUDA type crosses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hearth/session.h"
#include "hearth/types.h"
#include "core/weight_views.h"
#include "sparse/ffn_types.h"

namespace hearth {
class TraceRecorder;
}

namespace hearth::backend {

struct MemoryInfo {
  uint64_t total = 0;  // bytes the device has (the stand-in: its configured capacity)
  uint64_t free = 0;   // bytes it could allocate now
};

// What the device holds of one layer. Host views: the device copies what it needs in load().
struct DeviceLayer {
  // attn_norm, wq, wk, wv, wo on the device, and each session's KV cache of this layer.
  // Llama family only (Session falls back to the host for the others).
  bool attention = false;
  // FFN neurons on the device, ascending ids. Their rows of ffn_gate, ffn_up, down_t, fc2 (and
  // ffn_up bias) are gathered into compact [hot.size(), ...] matrices at load, one transfer per
  // matrix; fc1 and ffn_down's bias go along when hot is not empty.
  std::vector<int32_t> hot;
  const LayerWeights* weights = nullptr;
  const Matrix* down_t = nullptr;  // [n_ff, n_embd]: the file's ffn_down_t or the one made at load
  bool predictor = false;          // fc1 and the hot rows of fc2 on the device
};

// Everything a device needs to hold its part of a model.
struct DeviceModel {
  ModelConfig config;
  std::vector<DeviceLayer> layers;  // [n_layer]
};

// The session-dependent part: context, batch, cache type, and how the FFN decides which hot
// neurons are active (the same rule, per neuron, as the host's FfnExecutor).
struct DeviceSessionOptions {
  int32_t n_ctx = 0;         // positions each sequence's KV cache holds
  int32_t n_seq = 1;         // sequences (KV caches) the session decodes side by side
  int32_t n_batch = 0;       // most tokens one attention() call gets
  int32_t n_ffn_batch = 8;   // most tokens one ffn_begin() call gets (sparse::kMaxSparseBatch)
  KvType kv_type = KvType::F16;
  SparseMode mode = SparseMode::Dense;    // never Auto
  // [n_layer] the host's sparse::layer_rule() of each layer, or empty: `mode` at threshold 0.
  std::vector<sparse::LayerRule> rules;
  int64_t predictor_width = 0;            // the widest fc1 (rows), for scratch sizing
};

// One session's state on the device: its KV caches and activation buffers. Calls come from the
// session's thread, in order.
class DeviceSession {
 public:
  virtual ~DeviceSession() = default;

  // x[n, n_embd] += wo · attention(rope(wq · rms_norm(x)), kv cache of sequence seq) for layer il
  // at positions pos0 .. pos0 + n - 1 (x is host memory, updated before the call returns).
  // Requires the layer's attention on the device, n <= n_batch and 0 <= seq < n_seq.
  virtual void attention(int64_t il, int32_t seq, float* x, int64_t n, int64_t pos0) = 0;

  // Starts out[n, n_embd] = FFN of layer il over its hot neurons only, with xn[n, n_embd] the
  // normed input and p[n, n_embd] the predictor's input (host memory, read before the call
  // returns). Returns at once; n <= n_ffn_batch.
  virtual void ffn_begin(int64_t il, const float* xn, const float* p, int64_t n) = 0;
  // Waits for ffn_begin's work and adds its result to out[n, n_embd] (host memory); counts its
  // active neurons and weight bytes into stats (not neurons_total: the session counts n_ff).
  virtual void ffn_end(float* out, SparseStats& stats) = 0;

  // Spans of device work go to this recorder's device track (nullptr: none).
  virtual void set_trace(TraceRecorder* trace) = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string name() const = 0;
  virtual MemoryInfo memory() const = 0;
  // Bytes allocated now and at most since creation: exact, the sum of every live allocation.
  virtual uint64_t allocated() const = 0;
  virtual uint64_t peak_allocated() const = 0;

  // Device bytes that one session's activation buffers take (not its KV cache), so the placement
  // can leave room for them.
  virtual uint64_t session_scratch_bytes(const ModelConfig& config,
                                         const DeviceSessionOptions& options) const = 0;

  // Copies the model's device part. Once; throws hearth::Error when it does not fit (nothing is
  // left allocated then).
  virtual void load(const DeviceModel& model) = 0;

  // Allocates a session's KV caches (layers with attention) and buffers; throws hearth::Error when
  // they do not fit.
  virtual std::unique_ptr<DeviceSession> open_session(const DeviceSessionOptions& options) = 0;
};

// The devices this build can make.
//   "standin": the CPU stand-in with `standin_bytes` of memory and n_threads threads;
//   "cuda":    the first CUDA GPU (throws hearth::Error when this build or machine has none).
std::unique_ptr<Device> make_device(const std::string& kind, uint64_t standin_bytes,
                                    int n_threads);

// Whether this build has CUDA support and a GPU is present (no error when not).
bool cuda_available();

}  // namespace hearth::backend
