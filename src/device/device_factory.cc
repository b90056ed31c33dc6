#include "device/device.h"

#include "device/cuda_entry.h"
#include "device/standin/standin_device.h"
#include "core/error.h"

namespace hearth::backend {

std::unique_ptr<Device> make_device(const std::string& kind, uint64_t standin_bytes,
                                    int n_threads) {
  if (kind == "standin") return std::make_unique<StandinDevice>(standin_bytes, n_threads);
  // Without CUDA support or without a GPU this fails with a line that says which.
  if (kind == "cuda") return make_cuda_device(0);
  fail("unknown device '", kind, "' (expected none, auto, cuda or standin)");
}

bool cuda_available() { return cuda_device_count() > 0; }

}  // namespace hearth::backend
