// Row groups (backend/cpu/kernels/row_groups.h): 16 rows of a K-quant or 32-weight block type
// rewritten as a group, and the product over groups, for every ISA this CPU has. Against the
// row-major dot products the groups' outputs differ only by float rounding (the same weights, the
// same activation integers); against the scalar reference of the group product they are the same
// bits, whatever the token count.
#include "backend/cpu/kernels/row_groups.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "common/kernel_test_util.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace hearth {
namespace {

// rows x cols weights of type t (a type with row groups): every byte `fill` (random where fill <
// 0), then small f16 factors.
std::vector<uint8_t> weights(DType t, int64_t rows, int64_t cols, uint32_t seed, int fill = -1) {
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes(t, cols)));
  std::mt19937 rng(seed);
  for (auto& b : w) b = static_cast<uint8_t>(fill < 0 ? rng() : static_cast<uint32_t>(fill));
  std::uniform_real_distribution<float> factor(-0.05f, 0.05f);
  const size_t block = static_cast<size_t>(row_bytes(t, dtype_block_size(t)));
  // Where each block keeps its f16 factors (d, then dmin or m for the types with mins); the
  // 32-weight types lead with them.
  size_t at = 0, count = 1;
  if (t == DType::Q2_K) at = offsetof(BlockQ2_K, d), count = 2;
  if (t == DType::Q3_K) at = offsetof(BlockQ3_K, d);
  if (t == DType::Q4_K) at = offsetof(BlockQ4_K, d), count = 2;
  if (t == DType::Q5_K) at = offsetof(BlockQ5_K, d), count = 2;
  if (t == DType::Q6_K) at = offsetof(BlockQ6_K, d);
  if (t == DType::Q4_1 || t == DType::Q5_1) count = 2;
  for (size_t off = 0; off < w.size(); off += block) {
    for (size_t i = 0; i < count; ++i) {
      const uint16_t h = fp32_to_fp16(factor(rng));
      std::memcpy(&w[off + at + 2 * i], &h, sizeof h);
    }
  }
  return w;
}

// The matrix with every 16 rows rewritten as a group.
std::vector<uint8_t> grouped(DType t, const cpu::WeightKernels& k, const std::vector<uint8_t>& w,
                             int64_t rows, int64_t cols) {
  const size_t ldw = static_cast<size_t>(row_bytes(t, cols));
  std::vector<uint8_t> g(w.size());
  for (int64_t r = 0; r < rows; r += cpu::kGroupRows) {
    k.to_row_group(cols, w.data() + r * ldw, ldw, g.data() + r * ldw);
  }
  return g;
}

// Row-major dot products against group products, and the group products of every table against
// the scalar one, for nt tokens.
void check(DType type, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
           const std::vector<float>& x, int64_t nt) {
  const cpu::Kernels ref_table = cpu::select_kernels(cpu::Isa::Scalar);
  const cpu::WeightKernels& ref = ref_table.weights(type);
  ASSERT_NE(ref.to_row_group, nullptr);
  const auto g = grouped(type, ref, w, rows, cols);
  const size_t ldw = static_cast<size_t>(row_bytes(type, cols));
  const size_t ldx = cpu::act_row_bytes(ref.act, cols);
  std::vector<uint8_t> xq(ldx * static_cast<size_t>(nt));
  for (int64_t t = 0; t < nt; ++t) ref.to_act(x.data() + t * cols, xq.data() + t * ldx, cols);
  const size_t ldy = static_cast<size_t>(rows) + 5;
  const int64_t ng = rows / cpu::kGroupRows;
  std::vector<float> want(ldy * static_cast<size_t>(nt), -1.0f);
  ref.gemm_row_groups(cols, g.data(), ldw, ng, xq.data(), ldx, nt, want.data(), ldy);
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const float dense = ref.dot(cols, w.data() + r * ldw, xq.data() + t * ldx);
      // Each super-block's two float terms are below 2^31 d dx in magnitude, and each adds its
      // own rounding: a loose bound, growing as the square root of their count.
      const double tol =
          1e-4 * (std::fabs(dense) + 1.0) * std::sqrt(static_cast<double>(cols) / kQK_K + 1.0);
      ASSERT_NEAR(want[t * ldy + r], dense, tol)
          << dtype_name(type) << " r=" << r << " t=" << t << " cols=" << cols;
    }
    for (size_t r = static_cast<size_t>(rows); r < ldy; ++r) {
      ASSERT_EQ(want[t * ldy + r], -1.0f) << "wrote past the rows";
    }
  }
  for (cpu::Isa isa : test::isas()) {
    const cpu::Kernels table = cpu::select_kernels(isa);
    const cpu::WeightKernels& k = table.weights(type);
    const std::string where = std::string(cpu::isa_name(isa)) + " " +
                              std::string(dtype_name(type)) + " rows=" + std::to_string(rows) +
                              " cols=" + std::to_string(cols) + " nt=" + std::to_string(nt);
    if (!k.gemm_row_groups) {
      // A level where the type's groups do not pay leaves both entries out.
      ASSERT_EQ(k.to_row_group, nullptr) << where;
      continue;
    }
    if (isa != cpu::Isa::Scalar) {
      ASSERT_NE(k.gemm_row_groups, ref.gemm_row_groups) << where;
    }
    ASSERT_EQ(grouped(type, k, w, rows, cols), g) << where;
    std::vector<float> y(want.size(), -1.0f);
    k.gemm_row_groups(cols, g.data(), ldw, ng, xq.data(), ldx, nt, y.data(), ldy);
    ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0) << where;
    // One token at a time: the same bits as in the tile.
    for (int64_t t = 0; t < nt; ++t) {
      std::vector<float> one(static_cast<size_t>(rows));
      k.gemm_row_groups(cols, g.data(), ldw, ng, xq.data() + t * ldx, ldx, 1, one.data(), 0);
      ASSERT_EQ(std::memcmp(one.data(), &want[t * ldy], one.size() * sizeof(float)), 0)
          << where << " token " << t << " alone";
    }
  }
}

// Every type with row groups.
constexpr DType kGroupTypes[] = {DType::Q2_K, DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                                 DType::Q6_K, DType::IQ4_XS, DType::Q4_0,  DType::Q4_1,
                                 DType::Q5_0, DType::Q5_1,   DType::IQ4_NL};

TEST(RowGroups, TheLevelsWhereTheyPayHaveThem) {
  for (cpu::Isa isa : test::isas()) {
    const cpu::Kernels table = cpu::select_kernels(isa);
    EXPECT_NE(table.weights(DType::Q2_K).gemm_row_groups, nullptr) << cpu::isa_name(isa);
    EXPECT_NE(table.weights(DType::Q4_K).gemm_row_groups, nullptr) << cpu::isa_name(isa);
    // Every other grouped type's at every level, but Q3_K's with AVX-VNNI (its row panels pay
    // more there).
    for (const DType t : {DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::Q4_0, DType::Q4_1,
                          DType::Q5_0, DType::Q5_1, DType::IQ4_NL}) {
      EXPECT_NE(table.weights(t).gemm_row_groups, nullptr) << cpu::isa_name(isa);
    }
    EXPECT_EQ(table.weights(DType::Q3_K).gemm_row_groups != nullptr, isa != cpu::Isa::AvxVnni)
        << cpu::isa_name(isa);
    // The 8-bit and float types keep their rows everywhere.
    for (const DType t : {DType::Q8_0, DType::F16}) {
      EXPECT_EQ(table.weights(t).gemm_row_groups, nullptr) << cpu::isa_name(isa);
    }
  }
}

TEST(RowGroups, MatchTheRowMajorProductAndTheReference) {
  for (const DType type : kGroupTypes) {
    const bool super = dtype_block_size(type) == kQK_K;
    for (int64_t cols :
         super ? std::vector<int64_t>{256, 768, 1280} : std::vector<int64_t>{32, 96, 288, 800}) {
      for (int64_t rows : {16, 48}) {
        const auto w = weights(type, rows, cols, static_cast<uint32_t>(rows + cols));
        // 19: more than kMaxDecodeStepTokens, a prompt's path (codes unpacked per group).
        for (int64_t nt : {1, 2, 3, 5, 9, 19}) {
          const auto x = test::random_floats(nt * cols, static_cast<uint32_t>(nt * 13 + cols));
          check(type, w, rows, cols, x, nt);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Codes and scales at their extremes against activations at +-1 (quantized to +-127): the int16
// pairs and sums must not overflow or saturate.
TEST(RowGroups, ExtremeCodesDoNotOverflow) {
  // More tokens than a decode step takes, so that prompts' paths are covered too.
  constexpr int64_t kRows = 32, kCols = 512, kTokens = 19;
  std::vector<float> x(static_cast<size_t>(kTokens * kCols));
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t i = 0; i < kCols; ++i) {
      const float sign = t % 3 == 0 ? 1.0f : t % 3 == 1 ? -1.0f : (i / 16) % 2 ? 1.0f : -1.0f;
      x[static_cast<size_t>(t * kCols + i)] = sign;
    }
  }
  for (const DType type : kGroupTypes) {
    for (int fill : {0x00, 0xff, 0x0f, 0xf0, 0xc3}) {
      check(type, weights(type, kRows, kCols, static_cast<uint32_t>(fill), fill), kRows, kCols, x,
            kTokens);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace hearth
