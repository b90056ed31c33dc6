#include "backend/device.h"

#include "backend/standin/standin_device.h"
#include "core/error.h"

namespace hearth::backend {

std::unique_ptr<Device> make_device(const std::string& kind, uint64_t standin_bytes,
                                    int n_threads) {
  if (kind == "standin") return std::make_unique<StandinDevice>(standin_bytes, n_threads);
  if (kind == "cuda") {
    fail("this build has no CUDA support: configure with -DHEARTH_CUDA=ON");
  }
  fail("unknown device '", kind, "' (expected none, auto, cuda or standin)");
}

bool cuda_available() { return false; }

}  // namespace hearth::backend
