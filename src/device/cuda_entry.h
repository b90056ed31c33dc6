// The CUDA backend's entry points, as the device factory (device/device_factory.cc) sees them.
// Plain C++: no CUDA header or type crosses this file. A build with -DHEARTH_CUDA=ON gets the real
// ones (device/cuda/), any other build device/no_cuda/ (which finds no GPU), so callers need no
// #ifdef.
#pragma once

#include <memory>

#include "device/device.h"

namespace hearth::backend {

// The CUDA GPU `device_index` (0-based, in CUDA's order) as a Device. Throws hearth::Error when
// this build has no CUDA support, the index is out of range, or the GPU cannot be used.
std::unique_ptr<Device> make_cuda_device(int device_index);

// How many CUDA GPUs this process can use: 0 when this build has no CUDA support and on any
// error (no driver, no GPU). Never throws or aborts.
int cuda_device_count();

}  // namespace hearth::backend
