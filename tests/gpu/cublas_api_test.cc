// cuBLAS is loaded at run time (device/cuda/cublas_api.h). Loading it needs no GPU, so this runs
// wherever the CUDA build does (CI included).
#include <gtest/gtest.h>

#include <string>

#include "device/cuda/cublas_api.h"

namespace hearth::gpu {
namespace {

TEST(CublasApi, LoadsEveryEntryPointWithoutAGpu) {
  const CublasApi& api = cublas();
  EXPECT_NE(api.create, nullptr);
  EXPECT_NE(api.destroy, nullptr);
  EXPECT_NE(api.set_stream, nullptr);
  EXPECT_NE(api.set_workspace, nullptr);
  EXPECT_NE(api.gemm_ex, nullptr);
  EXPECT_EQ(std::string(api.status_name(CUBLAS_STATUS_SUCCESS)), "CUBLAS_STATUS_SUCCESS");
  EXPECT_EQ(&cublas(), &api);  // loaded once
}

}  // namespace
}  // namespace hearth::gpu
