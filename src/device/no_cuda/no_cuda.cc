// device/cuda_entry.h for builds without CUDA (HEARTH_CUDA=OFF): no GPU is ever found, and
// asking for one says how to get a build that has them.
#include "device/cuda_entry.h"
#include "core/error.h"

namespace hearth::backend {

std::unique_ptr<Device> make_cuda_device(int /*device_index*/) {
  fail("this build has no CUDA support: configure with -DHEARTH_CUDA=ON");
}

int cuda_device_count() { return 0; }

}  // namespace hearth::backend
