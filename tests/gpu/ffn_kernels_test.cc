// The hot FFN's element-wise and list kernels on the GPU: the active list compaction, the
// activations (against ops/activation.h's scalar references), the modes' masks, the GLU
// product and the predictor.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "device/cuda/kernels_reference.h"
#include "device/cuda/kernels_test_api.h"
#include "gpu_test_util.h"
#include "model/config.h"
#include "ops/activation.h"

namespace hearth::test {
namespace {

namespace api = gpu::test_api;

// Absolute slack of the activation comparisons (see ActivationsMatchScalarReferences).
constexpr double kAbsTolerance = 1e-6;

constexpr FfnActivation kActs[] = {FfnActivation::Silu, FfnActivation::Relu, FfnActivation::Relu2,
                                   FfnActivation::Gelu};

std::vector<float> host_activate(FfnActivation a, std::vector<float> x) {
  activate(cpu::Isa::Scalar, to_activation(a), x.data(), static_cast<int64_t>(x.size()), x.data());
  return x;
}

// Values with many exact zeros, as ReLU activations have.
std::vector<float> sparse_values(int64_t n, uint32_t seed) {
  auto v = random_floats(n, seed, 1.0f);
  for (float& x : v) x = x > 0.3f ? x : 0.0f;
  return v;
}

TEST(GpuFfnKernels, CompactListsNonZeroColumnsInOrder) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  for (const int64_t k : {1, 37, 1024, 2500}) {
    for (const int64_t n : {1, 3, 8}) {
      const auto v = sparse_values(n * k, static_cast<uint32_t>(k + n));
      const gpu::reference::Compacted want = gpu::reference::compact_nonzero(v.data(), n, k);
      const api::CompactResult got = api::compact(v.data(), n, k);
      EXPECT_EQ(got.kept, static_cast<int32_t>(want.idx.size())) << "k " << k << " n " << n;
      EXPECT_EQ(got.idx, want.idx) << "k " << k << " n " << n;
      EXPECT_EQ(got.pairs, want.pairs) << "k " << k << " n " << n;
    }
  }
  const std::vector<float> none(3 * 50, 0.0f);
  EXPECT_EQ(api::compact(none.data(), 3, 50).kept, 0);
}

TEST(GpuFfnKernels, ActivationsMatchScalarReferences) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  auto x = random_floats(1001, 61, 3.0f);
  x.insert(x.end(), {0.0f, -0.0f, 30.0f, -30.0f, 100.0f, -100.0f});
  for (const FfnActivation a : kActs) {
    const auto want = host_activate(a, x);
    std::vector<float> got(x.size());
    api::activate(a, x.data(), static_cast<int64_t>(x.size()), got.data());
    // expf/tanhf against std::exp/std::tanh: a few ulps, except where gelu's 1 + tanh cancels
    // (x around -5): there an ulp of tanh is an absolute 0.5·|x|·2^-24.
    expect_all_near(got, want, {}, 2e-6, kAbsTolerance, "activation " + to_string(a));
  }
}

TEST(GpuFfnKernels, ActMaskKeepsWhatFires) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n = 3, k = 45;
  const auto x = random_floats(n * k, 62, 1.0f);
  for (const FfnActivation a : kActs) {
    const auto act = host_activate(a, x);
    std::vector<float> mags(act.size());
    for (size_t i = 0; i < act.size(); ++i) mags[i] = std::fabs(act[i]);
    for (const float threshold : {0.0f, gap_threshold(mags)}) {
      std::vector<float> want = act, got = x;
      for (float& v : want) {
        const bool fires = threshold > 0.0f ? std::fabs(v) > threshold : v != 0.0f;
        if (!fires) v = 0.0f;
      }
      api::act_mask(a, threshold, got.data(), n, k);
      expect_all_near(got, want, {}, 2e-6, kAbsTolerance,
                      "act_mask " + to_string(a) + " threshold " + std::to_string(threshold));
    }
  }
}

TEST(GpuFfnKernels, ScoreMaskIsOneAtOrAboveThreshold) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n = 2, k = 33;
  auto s = random_floats(n * k, 63, 1.0f);
  s[5] = 0.25f;  // exactly at the threshold: active (>=)
  std::vector<float> want(s.size());
  for (size_t i = 0; i < s.size(); ++i) want[i] = s[i] >= 0.25f ? 1.0f : 0.0f;
  api::score_mask(0.25f, s.data(), n, k);
  EXPECT_EQ(s, want);
}

TEST(GpuFfnKernels, GluOracleCombineAndAbsMask) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n = 3, k = 40;
  std::vector<int32_t> idx;
  for (int32_t j = 0; j < k; j += 3) idx.push_back(j);
  const auto count = static_cast<int64_t>(idx.size());
  const auto g = random_floats(n * k, 64, 1.0f);
  const auto u = random_floats(n * k, 65, 1.0f);
  const auto mask = sparse_values(n * k, 66);  // zero: the token's predictor did not pick it
  for (const FfnActivation a : kActs) {
    for (const bool up_relu : {false, true}) {
      for (const bool gated : {true, false}) {
        for (const bool masked : {false, true}) {
          std::vector<float> want = u, got = u;
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t jj = 0; jj < count; ++jj) {
              const int64_t at = t * k + jj;
              float up = u[at];
              float v;
              if (gated) {
                if (up_relu) up = up > 0.0f ? up : 0.0f;
                v = host_activate(a, {g[at]})[0] * up;
              } else {
                v = host_activate(a, {up})[0];
              }
              if (masked && mask[t * k + idx[jj]] == 0.0f) v = 0.0f;
              want[at] = v;
            }
          }
          api::glu(a, up_relu, gated ? g.data() : nullptr, got.data(),
                   masked ? mask.data() : nullptr, idx.data(), count, n, k);
          expect_all_near(got, want, {}, 4e-6, kAbsTolerance, "glu " + to_string(a));
        }
      }
    }
  }
  // oracle_combine: a = relu'(u) · f[idx] (or f[idx] alone), over the listed positions only.
  for (const bool with_up : {true, false}) {
    std::vector<float> want = g, got = g;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t jj = 0; jj < count; ++jj) {
        const float up = u[t * k + jj] > 0.0f ? u[t * k + jj] : 0.0f;
        const float f = mask[t * k + idx[jj]];
        want[t * k + jj] = with_up ? up * f : f;
      }
    }
    api::oracle_combine(true, with_up ? u.data() : nullptr, mask.data(), idx.data(), count, n, k,
                        got.data());
    EXPECT_EQ(got, want) << (with_up ? "gated" : "ungated");
  }
  // abs_mask: |a| > threshold keeps a, over the first `count` columns only.
  std::vector<float> want = u, got = u;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t jj = 0; jj < count; ++jj) {
      if (!(std::fabs(want[t * k + jj]) > 0.5f)) want[t * k + jj] = 0.0f;
    }
  }
  api::abs_mask(0.5f, got.data(), count, n, k);
  EXPECT_EQ(got, want);
}

TEST(GpuFfnKernels, PredictorMatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n_embd = 96, h = 40, k = 37;
  for (const DType t1 : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    for (const DType t2 : {DType::F16, DType::F32}) {
      for (const int64_t n : {1, 3, 8}) {
        const auto fc1 = random_weights(t1, h, n_embd, 71);
        const auto fc2 = random_weights(t2, k, h, 72);
        const auto p = random_floats(n * n_embd, 73, 1.0f);
        std::vector<float> hidden(n * h), score(n * k);
        gpu::reference::matmul(t1, fc1.data(), h, n_embd, p.data(), n, hidden.data());
        for (float& v : hidden) v = v > 0.0f ? v : 0.0f;
        gpu::reference::matmul(t2, fc2.data(), k, h, hidden.data(), n, score.data());
        const float threshold = gap_threshold(score);
        std::vector<float> want(n * k), got(n * k);
        for (size_t i = 0; i < score.size(); ++i) want[i] = score[i] >= threshold ? 1.0f : 0.0f;
        api::predictor(t1, fc1.data(), h, t2, fc2.data(), k, n_embd, p.data(), n, threshold,
                       got.data());
        EXPECT_EQ(got, want) << dtype_name(t1) << "/" << dtype_name(t2) << " n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace hearth::test
