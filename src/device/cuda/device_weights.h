// The part of a model a CudaDevice holds (device/device.h's DeviceModel, uploaded): per layer the
// attention weights, and the hot FFN neurons as compact matrices whose row j is hot neuron
// hot[j]. Internal to device/cuda/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/cuda/device_memory.h"
#include "device/cuda/kernel_types.h"
#include "device/device.h"

namespace hearth::gpu {

// A weight matrix in device memory (ggml layout, the stored type).
struct DeviceMatrix {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  DeviceBuffer data;

  bool present() const { return data.get() != nullptr; }
  int64_t row_bytes() const { return hearth::row_bytes(type, cols); }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(); }
  MatrixView view() const { return MatrixView{type, data.get(), rows, cols, row_bytes()}; }
};

struct DeviceLayerWeights {
  bool attention = false;
  DeviceBuffer attn_norm;  // [n_embd] f32; empty when the layer has no norm weight
  DeviceMatrix wq, wk, wv, wo;

  int64_t n_hot = 0;       // hot neurons (0: the FFN is all on the host)
  DeviceMatrix gate;       // [n_hot, n_embd]  absent for ungated FFNs
  DeviceMatrix up;         // [n_hot, n_embd]
  DeviceMatrix down_t;     // [n_hot, n_embd]
  DeviceBuffer up_bias;    // [n_hot] or empty
  bool predictor = false;
  DeviceMatrix fc1;  // [H, n_embd]
  DeviceMatrix fc2;  // [n_hot, H]
};

// What a session's buffers depend on in the loaded model.
struct ModelExtents {
  bool attention = false;   // some layer runs its attention here
  int64_t k_max = 0;        // most hot neurons in a layer
  int64_t h_max = 0;        // widest predictor
  size_t gemm_weights = 0;  // cuBLAS F16 scratch for the largest quantized attention matrix
};

// Bounds for a model not loaded yet: every neuron hot, predictors as wide as the FFN, attention
// matrices quantized.
ModelExtents extents_bound(const ModelConfig& config);

struct DeviceModelData {
  ModelConfig config;
  std::vector<DeviceLayerWeights> layers;
  ModelExtents extents;
};

// Checks `model` (shapes, types, hot ids) and copies its device part: whole matrices with one
// cudaMemcpy each, hot rows gathered on the host into a page-locked staging buffer first, then one
// cudaMemcpy per matrix. Throws hearth::Error on bad input or when memory runs out, having freed
// whatever it allocated.
std::unique_ptr<DeviceModelData> upload_model(DeviceAllocator& alloc,
                                              const backend::DeviceModel& model);

}  // namespace hearth::gpu
