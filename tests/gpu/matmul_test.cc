// Dense, gathered and axpy products of every weight type on the GPU against the double-precision
// references of kernels_reference.h (float activations, exactly dequantized weights). Odd row
// counts, block-multiple columns for the quantized types, several token counts: the matvec
// kernel's tiles and the cuBLAS path of prompt-sized batches.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "device/cuda/kernel_types.h"
#include "device/cuda/kernels_reference.h"
#include "device/cuda/kernels_test_api.h"
#include "gpu_test_util.h"

namespace hearth::test {
namespace {

namespace api = gpu::test_api;
namespace ref = gpu::reference;

std::vector<int64_t> gpu_cols(DType t) {
  if (dtype_block_size(t) > 1) return {96, 160};
  return {37, 96, 160};
}

std::string label(DType t, int64_t cols, int64_t n) {
  return std::string(dtype_name(t)) + " cols " + std::to_string(cols) + " n " + std::to_string(n);
}

// Relative error bound of the cuBLAS path: activations rounded to F16 (2^-11) or BF16 (2^-8),
// quantized weights dequantized to F16; F32 stays F32.
double gemm_tolerance(DType t) {
  switch (t) {
    case DType::F32:
      return 1e-5;
    case DType::BF16:
      return 8e-3;
    default:
      return 2e-3;
  }
}

// Every active list of `rows` rows the tests use: ascending with gaps, one row, all rows.
std::vector<std::vector<int32_t>> lists(int64_t rows) {
  std::vector<int32_t> gaps, all;
  for (int32_t r = 0; r < rows; ++r) {
    if (r % 3 != 1) gaps.push_back(r);
    all.push_back(r);
  }
  return {gaps, {static_cast<int32_t>(rows - 1)}, all};
}

TEST(GpuMatmul, LinearMatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t rows = 37;
  for (const DType t : kAllTypes) {
    for (const int64_t cols : gpu_cols(t)) {
      const auto w = random_weights(t, rows, cols, 31);
      for (const int64_t n :
           {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{13}, gpu::kGemmMinTokens + 5}) {
        const auto x = random_floats(n * cols, 32, 1.0f);
        std::vector<float> want(n * rows), scale(n * rows);
        ref::matmul(t, w.data(), rows, cols, x.data(), n, want.data(), scale.data());
        const double rel = n >= gpu::kGemmMinTokens ? gemm_tolerance(t) : 1e-5;
        std::vector<float> got(n * rows, 0.0f);
        api::linear(t, w.data(), rows, cols, x.data(), n, got.data(), false);
        expect_all_near(got, want, scale, rel, 1e-6, "linear " + label(t, cols, n));
        // accumulate: y += x · W^T on top of what y holds.
        const auto base = random_floats(n * rows, 33, 1.0f);
        std::vector<float> acc = base;
        api::linear(t, w.data(), rows, cols, x.data(), n, acc.data(), true);
        for (size_t i = 0; i < want.size(); ++i) want[i] += base[i];
        expect_all_near(acc, want, scale, rel, 1e-5, "accumulating linear " + label(t, cols, n));
      }
    }
  }
}

TEST(GpuMatmul, GatherMatvecMatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t rows = 37;
  for (const DType t : kAllTypes) {
    for (const int64_t cols : gpu_cols(t)) {
      const auto w = random_weights(t, rows, cols, 41);
      const auto bias = random_floats(rows, 42, 1.0f);
      for (const auto& idx : lists(rows)) {
        const auto k = static_cast<int64_t>(idx.size());
        for (const int64_t n : {1, 3, 8, 11}) {
          for (const bool with_bias : {false, true}) {
            const float* b = with_bias ? bias.data() : nullptr;
            const auto x = random_floats(n * cols, 43, 1.0f);
            std::vector<float> want(n * k), scale(n * k), got(n * k);
            ref::gather_matvec(t, w.data(), rows, cols, idx.data(), k, b, x.data(), n, want.data(),
                               scale.data());
            api::gather_matvec(t, w.data(), rows, cols, idx.data(), k, b, x.data(), n, got.data());
            expect_all_near(got, want, scale, 1e-5, 1e-6,
                            "gather_matvec " + label(t, cols, n) + " k " + std::to_string(k));
          }
        }
      }
    }
  }
}

TEST(GpuMatmul, AxpyMatchesReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  for (const DType t : kAllTypes) {
    for (const int64_t cols : gpu_cols(t)) {
      // More rows than one axpy chunk, so the partial sums of several chunks are merged.
      for (const int64_t rows : {37, 601}) {
        const auto w_t = random_weights(t, rows, cols, 51);
        const auto bias = random_floats(cols, 52, 1.0f);
        for (const auto& idx : lists(rows)) {
          const auto k = static_cast<int64_t>(idx.size());
          for (const int64_t n : {1, 3, 8, 11}) {
            auto a = random_floats(n * k, 53, 1.0f);
            // Zero coefficients, and whole neurons zero for every token (skipped rows).
            for (int64_t j = 0; j < k; j += 4) {
              for (int64_t i = 0; i < n; ++i) a[i * k + j] = 0.0f;
            }
            for (int64_t i = 0; i < n * k; i += 7) a[i] = 0.0f;
            for (const bool with_bias : {false, true}) {
              const float* b = with_bias ? bias.data() : nullptr;
              std::vector<float> want(n * cols), scale(n * cols), got(n * cols);
              ref::axpy(t, w_t.data(), rows, cols, idx.data(), k, a.data(), n, b, want.data(),
                        scale.data());
              api::axpy(t, w_t.data(), rows, cols, idx.data(), k, a.data(), n, b, got.data());
              // Up to kAxpyChunk terms summed in a row: a looser bound than the matvec's tree.
              expect_all_near(got, want, scale, 3e-5, 1e-6,
                              "axpy " + label(t, cols, n) + " rows " + std::to_string(rows) +
                                  " k " + std::to_string(k));
            }
          }
        }
      }
    }
  }
}

// A token's axpy is the same bits alone and beside other tokens whose rows the list also holds
// (their rows are zero coefficients for it): the chunks are ranges of rows, not of positions in
// the list, so its terms are grouped the same way in every batch (batch invariance).
TEST(GpuMatmul, AxpyGivesATokenTheSameBitsInAnyBatch) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  const int64_t rows = 601;  // three chunks of gpu::kAxpyChunk rows
  for (const DType t : kAllTypes) {
    for (const int64_t cols : gpu_cols(t)) {
      const auto w_t = random_weights(t, rows, cols, 61);
      // The token's own rows, and the union with two other tokens' rows (ascending).
      std::vector<int32_t> own, all;
      for (int32_t r = 0; r < rows; ++r) {
        if (r % 5 == 2) own.push_back(r);
        if (r % 5 == 2 || r % 3 == 0 || r % 7 == 1) all.push_back(r);
      }
      const auto k_own = static_cast<int64_t>(own.size()), k_all = static_cast<int64_t>(all.size());
      const auto coefs = random_floats(rows, 62, 1.0f);  // the token's coefficient of each row
      std::vector<float> a_own(k_own);
      for (int64_t j = 0; j < k_own; ++j) a_own[j] = coefs[own[j]];
      std::vector<float> alone(cols);
      api::axpy(t, w_t.data(), rows, cols, own.data(), k_own, a_own.data(), 1, nullptr,
                alone.data());
      // In a batch of 3, as its middle token; the others have coefficients on every listed row.
      const int64_t n = 3;
      auto a_all = random_floats(n * k_all, 63, 1.0f);
      for (int64_t j = 0; j < k_all; ++j) {
        a_all[k_all + j] = all[j] % 5 == 2 ? coefs[all[j]] : 0.0f;
      }
      std::vector<float> batch(n * cols);
      api::axpy(t, w_t.data(), rows, cols, all.data(), k_all, a_all.data(), n, nullptr,
                batch.data());
      const std::vector<float> middle(batch.begin() + cols, batch.begin() + 2 * cols);
      EXPECT_TRUE(same_bits(middle, alone)) << dtype_name(t) << " cols " << cols;
    }
  }
}

}  // namespace
}  // namespace hearth::test
