// linear_shared: the products of one input with several matrices (q, k, v; up and gate) in one
// pass when the matrices share a weight type, one linear() each when they do not. Either way the
// outputs are the bits of separate linear() calls and the matmul hook (imatrix) sees every matrix.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "common/kernel_test_util.h"
#include "ops/linear.h"

namespace hearth {
namespace {

struct CountingHook : cpu::MatmulHook {
  std::vector<const void*> seen;
  void on_matmul(const void* weights, const float*, int64_t, int64_t) override {
    seen.push_back(weights);
  }
};

void expect_same_as_separate(DType tb) {
  const int64_t cols = 96, n = 3;
  const int64_t rows[] = {17, 5, 5};
  const DType types[] = {DType::Q4_0, tb, DType::Q4_0};
  std::vector<std::vector<uint8_t>> data;
  Matrix m[3];
  for (int i = 0; i < 3; ++i) {
    data.push_back(test::random_weights(types[i], rows[i], cols, static_cast<uint32_t>(i + 1)));
    m[i] = Matrix{types[i], data.back().data(), rows[i], cols};
  }
  const auto x = test::random_floats(n * cols, 9);
  cpu::CpuContext ctx(2);
  CountingHook hook;
  ctx.set_matmul_hook(&hook);
  std::vector<float> y[3], want[3];
  for (int i = 0; i < 3; ++i) {
    y[i].assign(static_cast<size_t>(rows[i] * n), 0.0f);
    want[i].assign(y[i].size(), 1.0f);
    linear(ctx, m[i], x.data(), n, want[i].data());
  }
  hook.seen.clear();
  linear_shared(ctx, {{&m[0], y[0].data()}, {&m[1], y[1].data()}, {&m[2], y[2].data()}}, x.data(),
                n);
  ASSERT_EQ(hook.seen.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(hook.seen[static_cast<size_t>(i)], m[i].data);
    EXPECT_EQ(std::memcmp(y[i].data(), want[i].data(), y[i].size() * sizeof(float)), 0)
        << "matrix " << i << " " << dtype_name(tb);
  }
  ctx.set_matmul_hook(nullptr);
}

TEST(LinearShared, OneTypeEqualsSeparateProducts) { expect_same_as_separate(DType::Q4_0); }

TEST(LinearShared, MixedTypesFallBackToSeparateProducts) { expect_same_as_separate(DType::F16); }

}  // namespace
}  // namespace hearth
