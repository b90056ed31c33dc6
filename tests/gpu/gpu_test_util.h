// Shared by the GPU tests (label `gpu`): comparisons with stated tolerances and thresholds that
// keep clear of the values they split. Every test skips without a CUDA GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "device/cuda_entry.h"
#include "common/kernel_test_util.h"

namespace hearth::test {

using backend::cuda_device_count;

// 64-byte aligned storage (the host attention's workspace).
struct alignas(64) CacheLine {
  float f[16];
};

// |got[i] - want[i]| <= rel · scale[i] + abs for every i. scale is what bounds the rounding of
// any summation order (Σ |terms| from kernels_reference.h), or |want| itself when empty.
inline void expect_all_near(const std::vector<float>& got, const std::vector<float>& want,
                            const std::vector<float>& scale, double rel, double abs,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double s = scale.empty() ? std::fabs(want[i]) : scale[i];
    const double tol = rel * s + abs;
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i]
                    << " (tolerance " << tol << ")";
    }
  }
}

// The block-quantized weight types, whose host kernels quantize activations to Q8_0.
inline bool quantized(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }

// max |got - want| <= rel · max |want|: for results that went through several rounded steps
// (a whole attention block, an FFN), where element-wise bounds are not worth deriving.
inline void expect_close_to_max(const std::vector<float>& got, const std::vector<float>& want,
                                double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_want = 0.0, max_err = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_want = std::max(max_want, std::fabs(static_cast<double>(want[i])));
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= max_err)) {  // also catches a nan
      max_err = std::isnan(err) ? INFINITY : err;
      worst = i;
    }
  }
  EXPECT_LE(max_err, rel * max_want + 1e-6)
      << what << ": worst element " << worst << " is " << got[worst] << ", expected " << want[worst]
      << " (largest |expected| " << max_want << ")";
}

// A threshold half-way across the widest gap between neighbouring values among the middle half
// of the sorted values: no value lies near it, so a device and a host that round the values
// differently still agree on which side of it each one is.
inline float gap_threshold(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  const size_t lo = values.size() / 4, hi = values.size() * 3 / 4;
  size_t best = lo;
  for (size_t i = lo; i < hi && i + 1 < values.size(); ++i) {
    if (values[i + 1] - values[i] > values[best + 1] - values[best]) best = i;
  }
  return 0.5f * (values[best] + values[best + 1]);
}

}  // namespace hearth::test
