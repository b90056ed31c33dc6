// Causal grouped-query attention on the GPU against the host's scalar attention over the same
// caches: decode (one query) and prompt chunks (several), F16 and F32 caches, past positions.
#include "ops/attention.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/context.h"
#include "device/cuda/kernels_test_api.h"
#include "gpu_test_util.h"

namespace hearth::test {
namespace {

TEST(GpuAttention, MatchesScalarHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  struct Shape {
    int n_head, n_head_kv, head_dim;
  };
  const Shape shapes[] = {{4, 4, 16}, {8, 2, 64}, {6, 3, 40}, {2, 1, 128}, {4, 2, 256}};
  const int64_t n_ctx = 48;
  cpu::CpuContext ctx(1, cpu::Isa::Scalar);
  for (const Shape& sh : shapes) {
    for (const bool f16 : {true, false}) {
      for (const int64_t n_tokens : {1, 3, 8}) {
        for (const int64_t pos0 : {0, 29}) {
          AttentionParams p;
          p.n_head = sh.n_head;
          p.n_head_kv = sh.n_head_kv;
          p.head_dim = sh.head_dim;
          p.n_ctx = n_ctx;
          p.kv_type = f16 ? DType::F16 : DType::F32;
          const int64_t row = static_cast<int64_t>(sh.n_head_kv) * sh.head_dim;
          const int64_t n_rows = pos0 + n_tokens;
          const auto k = random_floats(n_rows * row, 21, 1.0f);
          const auto v = random_floats(n_rows * row, 22, 1.0f);
          const auto q = random_floats(n_tokens * sh.n_head * sh.head_dim, 23, 1.0f);
          std::vector<uint8_t> kc(kv_cache_bytes(p)), vc(kv_cache_bytes(p));
          kv_store(cpu::Isa::Scalar, p, k.data(), 0, 0, n_rows, kc.data());
          kv_store(cpu::Isa::Scalar, p, v.data(), 0, 0, n_rows, vc.data());

          std::vector<float> want(q.size()), got(q.size());
          std::vector<CacheLine> ws(attention_workspace_bytes(p, 1) / sizeof(CacheLine) + 1);
          attention(ctx, p, q.data(), kc.data(), vc.data(), pos0, n_tokens, want.data(), ws.data());
          gpu::test_api::attention(sh.n_head, sh.n_head_kv, sh.head_dim, f16, n_ctx, kc.data(),
                                   vc.data(), q.data(), pos0, n_tokens, got.data());
          // Outputs are convex combinations of V rows (|v| ~ 1): the online softmax and the
          // warps' merge change only the rounding.
          expect_all_near(got, want, {}, 1e-5, 2e-5,
                          "attention head_dim " + std::to_string(sh.head_dim) + " heads " +
                              std::to_string(sh.n_head) + "/" + std::to_string(sh.n_head_kv) +
                              " tokens " + std::to_string(n_tokens) + " pos0 " +
                              std::to_string(pos0) + (f16 ? " f16" : " f32"));
        }
      }
    }
  }
}

}  // namespace
}  // namespace hearth::test
