// The CPU stand-in for a GPU: a second CPU backend with its own threads and a memory budget
// (DESIGN.md section 6). It holds what a placement puts on "the device" as copies in accounted
// memory and runs the same attention block and FFN executor as the host, on its own worker thread,
// so the placement, the hot/cold split, the concurrency and the merge are all exercised in CI
// where no GPU exists. It is a test device, not a way to go faster.
#pragma once

#include <memory>

#include "device/device.h"
#include "device/standin/standin_memory.h"

namespace hearth::backend {

class StandinDevice : public Device {
 public:
  StandinDevice(uint64_t capacity, int n_threads);
  ~StandinDevice() override;

  std::string name() const override;
  MemoryInfo memory() const override;
  uint64_t allocated() const override { return memory_.allocated(); }
  uint64_t peak_allocated() const override { return memory_.peak(); }
  uint64_t session_scratch_bytes(const ModelConfig& config,
                                 const DeviceSessionOptions& options) const override;
  void load(const DeviceModel& model) override;
  std::unique_ptr<DeviceSession> open_session(const DeviceSessionOptions& options) override;

  // What load() made, per layer (the sessions read it).
  struct Layer {
    bool attention = false;
    std::vector<StandinMemory::Block> vectors;  // attn_norm, up bias
    std::vector<DeviceMatrix> matrices;
    LayerWeights attn;  // attn_norm, wq, wk, wv, wo views into device memory
    int64_t n_hot = 0;
    Matrix gate, up, down_t, fc1, fc2;  // [n_hot, ...] compact views (fc1 whole)
    const float* up_bias = nullptr;     // [n_hot]
  };

 private:
  StandinMemory memory_;
  int n_threads_;
  ModelConfig config_;
  std::vector<Layer> layers_;
};

}  // namespace hearth::backend
