// RMSNorm, RoPE and KV cache writes on the GPU against the host's scalar ops, which they
// reproduce to the bit (RoPE, KV) or up to the order of a double sum (RMSNorm).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "device/cuda/kernels_test_api.h"
#include "core/fp16.h"
#include "gpu_test_util.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace hearth::test {
namespace {

namespace api = gpu::test_api;

TEST(GpuNorm, RmsNormMatchesScalar) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  for (const int64_t n : {37, 160, 4096}) {
    for (const int64_t rows : {1, 3}) {
      for (const bool weighted : {true, false}) {
        const auto x = random_floats(rows * n, 11, 2.0f);
        const auto w = uniform_floats(n, 12, 0.5f, 1.5f);
        const float* wp = weighted ? w.data() : nullptr;
        std::vector<float> want(x.size()), got(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          rms_norm(cpu::Isa::Scalar, x.data() + r * n, wp, 1e-5f, n, want.data() + r * n);
        }
        api::rms_norm(x.data(), wp, 1e-5f, rows, n, got.data());
        expect_all_near(got, want, {}, 1e-6, 1e-7, "rms_norm n=" + std::to_string(n));
      }
    }
  }
}

TEST(GpuRope, MatchesHostTableExactly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  struct Case {
    int n_head, head_dim, n_rot;
    RopeStyle style;
  };
  const Case cases[] = {{4, 16, 16, RopeStyle::Normal},
                        {4, 16, 16, RopeStyle::Neox},
                        {3, 64, 32, RopeStyle::Normal},
                        {3, 64, 32, RopeStyle::Neox},
                        {2, 40, 40, RopeStyle::Normal}};
  for (const Case& c : cases) {
    RopeParams p;
    p.n_rot = c.n_rot;
    p.freq_base = 10000.0f;
    p.style = c.style;
    const RopeTable table(p, 64);
    for (const int64_t n_tokens : {1, 3, 8}) {
      for (const int64_t pos0 : {0, 21}) {
        const auto x = random_floats(n_tokens * c.n_head * c.head_dim, 5, 1.0f);
        std::vector<float> want = x, got = x;
        table.apply(want.data(), n_tokens, c.n_head, c.head_dim, pos0);
        api::rope(table, got.data(), n_tokens, c.n_head, c.head_dim, pos0);
        // Same table, same rounding of each product and sum (no FMA): identical floats; the
        // dims from n_rot on pass through untouched.
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i]))
              << "element " << i << " head_dim " << c.head_dim << " n_rot " << c.n_rot << " pos0 "
              << pos0;
        }
      }
    }
  }
}

TEST(GpuKvStore, WritesRowsAtPositionsLikeTheHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t n_ctx = 20, row = 2 * 24;
  for (const bool f16 : {true, false}) {
    for (const int64_t n_tokens : {1, 3, 8}) {
      const int64_t pos0 = 7;
      const auto src = random_floats(n_tokens * row, 3, 4.0f);
      const size_t elem = f16 ? 2 : 4;
      // A cache already holding other rows: they must be left as they are.
      std::vector<uint8_t> want(static_cast<size_t>(n_ctx * row) * elem);
      for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 7);
      std::vector<uint8_t> got = want;
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < row; ++i) {
          const float v = src[t * row + i];
          uint8_t* at = want.data() + ((pos0 + t) * row + i) * elem;
          if (f16) {
            const uint16_t h = fp32_to_fp16(v);
            std::memcpy(at, &h, 2);
          } else {
            std::memcpy(at, &v, 4);
          }
        }
      }
      api::kv_store(f16, src.data(), n_tokens, row, pos0, n_ctx, got.data());
      EXPECT_EQ(got, want) << (f16 ? "f16" : "f32") << " cache, " << n_tokens << " tokens";
    }
  }
}

}  // namespace
}  // namespace hearth::test
