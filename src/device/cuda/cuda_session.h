// One session's state on a CUDA GPU: KV caches, activation buffers, a stream and its events, a
// cuBLAS handle for prompt-sized products, and page-locked staging for the host <-> device copies.
// Calls come from the session's thread, in order (device/device.h). Internal to device/cuda/.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "device/cuda/device_memory.h"
#include "device/cuda/cublas_api.h"
#include "device/cuda/device_weights.h"
#include "device/cuda/hot_ffn.h"
#include "device/cuda/linear.h"
#include "device/cuda/session_buffers.h"
#include "device/device.h"

namespace hearth::gpu {

struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const { cublas().destroy(h); }
};

class CudaDeviceSession final : public backend::DeviceSession {
 public:
  // `alloc` and `model` belong to the CudaDevice, which must outlive the session.
  CudaDeviceSession(DeviceAllocator& alloc, const DeviceModelData& model,
                    const backend::DeviceSessionOptions& options);
  ~CudaDeviceSession() override;

  void attention(int64_t il, int32_t seq, float* x, int64_t n, int64_t pos0) override;
  void ffn_begin(int64_t il, const float* xn, const float* p, int64_t n) override;
  void ffn_end(float* out, SparseStats& stats) override;
  // Keeps the recorder only. Recording the device spans is left to whoever integrates the
  // Device spans go to the recorder's device track: attention() as its host wall time, the hot
  // FFN from the ffn_start_/ffn_done_ events (cudaEventElapsedTime) placed at ffn_begin's time.
  void set_trace(TraceRecorder* trace) override { trace_ = trace; }

 private:
  void use_device() const;
  const DeviceLayerWeights& layer(int64_t il) const;
  HotFfnRule rule(int64_t il) const;
  HotFfnBuffers ffn_buffers() const;
  void upload_tables();

  DeviceAllocator& alloc_;
  const DeviceModelData& model_;
  backend::DeviceSessionOptions options_;
  SessionSizes sizes_;
  SessionBuffers buf_;
  std::vector<DeviceBuffer> k_cache_, v_cache_;  // [n_layer]; empty where attention is on the host
  PinnedBuffer pinned_x_;                        // [n_batch, n_embd]
  PinnedBuffer pinned_ffn_in_;                   // [2][n_ffn_batch, n_embd]: xn, then p
  PinnedBuffer pinned_ffn_out_;                  // [n_ffn_batch, n_embd]
  PinnedBuffer pinned_counters_;                 // FfnCounters
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<CUevent_st, EventDeleter> ffn_start_, ffn_done_;
  std::unique_ptr<cublasContext, CublasDeleter> cublas_;
  GemmContext gemm_;
  int64_t pending_layer_ = -1;  // ffn_begin's layer until ffn_end
  int64_t pending_n_ = 0;
  TraceRecorder* trace_ = nullptr;
  double trace_begin_us_ = 0.0;  // host time of the last ffn_begin, for its span
};

}  // namespace hearth::gpu
