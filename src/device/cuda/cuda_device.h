// backend::Device for one NVIDIA GPU: the attention of the layers placed on it and the FFN's hot
// neurons (device/device.h, docs/cuda.md). Made by make_cuda_device (device/cuda_entry.h).
// Internal to device/cuda/.
#pragma once

#include <memory>
#include <string>

#include "device/cuda/device_memory.h"
#include "device/cuda/device_weights.h"
#include "device/device.h"

namespace hearth::gpu {

// Sessions keep references into the device: it must outlive them.
class CudaDevice final : public backend::Device {
 public:
  explicit CudaDevice(int index);
  ~CudaDevice() override;

  std::string name() const override { return name_; }
  backend::MemoryInfo memory() const override;
  uint64_t allocated() const override { return alloc_.allocated(); }
  uint64_t peak_allocated() const override { return alloc_.peak(); }
  // Exact once a model is loaded; before, a bound that takes every neuron as hot.
  uint64_t session_scratch_bytes(const ModelConfig& config,
                                 const backend::DeviceSessionOptions& options) const override;
  void load(const backend::DeviceModel& model) override;
  std::unique_ptr<backend::DeviceSession> open_session(
      const backend::DeviceSessionOptions& options) override;

 private:
  int index_;
  std::string name_;
  // Mutable: memory() and the counters are const queries on a device that sessions allocate on.
  mutable DeviceAllocator alloc_;
  std::unique_ptr<DeviceModelData> model_;
};

}  // namespace hearth::gpu
