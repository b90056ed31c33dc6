// A small Llama-shaped model built in memory for the device-level GPU tests, and the host
// computations the device must reproduce: the attention block as forward_llama.cc runs it, and
// the FFN of the hot neurons as FfnExecutor runs it on a model made of those neurons alone.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/context.h"
#include "device/device.h"
#include "gpu_test_util.h"
#include "hearth/session.h"
#include "core/weight_views.h"
#include "ops/attention.h"
#include "ops/rope.h"
#include "sparse/ffn.h"

namespace hearth::test {

struct TestModelOptions {
  DType type = DType::F16;  // every weight matrix but the predictor's fc2 (F16)
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_rot = 16;  // <= head_dim = n_embd / n_head
  int64_t n_ff = 96;
  int64_t n_layer = 2;
  int64_t predictor_width = 32;
  RopeType rope = RopeType::Normal;
  FfnActivation act = FfnActivation::Silu;
  bool gated = true;
  bool up_relu = false;
  bool biases = false;  // ffn_up and ffn_down biases (OPT-style)
};

class TestModel {
 public:
  explicit TestModel(const TestModelOptions& o);

  const ModelConfig& config() const { return config_; }
  const LayerWeights& layer(int64_t il) const { return weights_.layers[static_cast<size_t>(il)]; }
  // Every layer with its attention (when asked) and the hot neurons `hot` (with its predictor
  // when asked) on the device.
  backend::DeviceModel device_model(bool attention, const std::vector<int32_t>& hot,
                                    bool predictor) const;

 private:
  Matrix matrix(DType t, int64_t rows, int64_t cols, float scale);
  const float* vector(int64_t n, float lo, float hi);

  ModelConfig config_;
  Weights weights_;
  std::vector<std::vector<uint8_t>> blobs_;  // the matrices' bytes
  std::vector<std::vector<float>> vectors_;  // norms and biases
  uint32_t seed_ = 1000;
};

// A CUDA device (GPU 0) holding `model`, and a session on it; the session goes first.
struct GpuSession {
  std::unique_ptr<backend::Device> device;
  std::unique_ptr<backend::DeviceSession> session;
};
GpuSession open_gpu_session(const backend::DeviceModel& model,
                            const backend::DeviceSessionOptions& options);

// The attention block of forward_llama.cc on the host (scalar kernels): per layer and sequence
// its own KV cache. With `exact_weights`, quantized projections are decoded to F32 first, so that
// activations are never quantized: the device's own arithmetic (it decodes weights exactly and
// multiplies float activations) rather than the host's Q8_0 activation scheme.
class HostAttention {
 public:
  HostAttention(const TestModel& model, int64_t n_ctx, int n_seq, KvType kv_type,
                bool exact_weights = false);
  // x[n, n_embd] += wo · attention(rope(wq · rms_norm(x)), cache of (il, seq)) at pos0 ..
  void run(int64_t il, int seq, float* x, int64_t n, int64_t pos0);

 private:
  // wq, wk, wv, wo of layer il as run() multiplies them.
  const Matrix& projection(int64_t il, int which) const;

  const TestModel& model_;
  std::vector<std::vector<float>> decoded_;  // F32 copies of quantized projections
  std::vector<Matrix> projections_;          // [n_layer * 4]: wq, wk, wv, wo
  cpu::CpuContext ctx_;
  AttentionParams params_;
  RopeTable rope_;
  int n_seq_;
  std::vector<std::vector<uint8_t>> k_cache_, v_cache_;  // [n_layer * n_seq]
  std::vector<float> xn_, q_, k_, v_, att_, out_;
  std::vector<CacheLine> workspace_;
};

// FfnExecutor on a model made of the hot neurons of one layer (their gate, up, down_t and fc2
// rows, up bias entries; fc1 and the down bias as they are): what the device's hot FFN must
// compute, and count.
class HostHotFfn {
 public:
  HostHotFfn(const TestModel& model, int64_t il, const std::vector<int32_t>& hot, SparseMode mode);
  void run(const float* xn, const float* p, int64_t n, float threshold, float down_threshold,
           float* out, SparseStats& stats);
  // The compact matrices, for tests that pick thresholds from the host's values.
  const sparse::FfnWeights& weights() const { return weights_; }

 private:
  std::vector<std::vector<uint8_t>> blobs_;
  std::vector<float> up_bias_;
  Matrix gate_, up_, down_t_, fc2_;
  sparse::FfnWeights weights_;
  cpu::CpuContext ctx_;
  sparse::FfnExecutor executor_;
};

}  // namespace hearth::test
