// device/cuda_entry.h in every build: without a usable GPU (always so without -DHEARTH_CUDA=ON)
// no device is counted and asking for one is a clean hearth::Error, never a crash.
#include "device/cuda_entry.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace hearth::backend {
namespace {

TEST(CudaEntry, NoGpuMeansCleanError) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  if (n > 0) GTEST_SKIP() << "this machine has a CUDA GPU (tests/gpu covers it)";
  try {
    make_cuda_device(0);
    FAIL() << "make_cuda_device succeeded without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hearth::backend
