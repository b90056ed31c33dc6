// dot, gemm and gemm_gather of the block weight types (core/quant_blocks.h) for every ISA this CPU
// has, against the scalar reference table. The vector kernels compute the same integer sums in
// the same lane order, so they differ from the reference only by FMA rounding; gemm outputs equal
// per-token dot products bit for bit whatever the tile shape, and gathered rows equal the same
// rows of gemm.
//
// Weights are random bytes with small random f16 factors written over the blocks' d/dmin/m
// fields, so every bit pattern of the codes and scales is exercised without depending on the
// quantizers.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernels/generic/act_q8_reader.h"
#include "backend/cpu/kernels/generic/block_codes.h"
#include "common/kernel_test_util.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace hearth {
namespace {

namespace generic = cpu::generic;

using CodesFn = void (*)(const void* row, int64_t b, generic::BlockCodes& c);

struct BlockType {
  DType t;
  std::vector<size_t> f16_fields;  // byte offsets of the f16 factors within a block
  CodesFn codes;
};

const std::vector<BlockType>& block_types() {
  static const std::vector<BlockType> types = {
      {DType::Q4_1, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}, generic::CodesQ4_1::get},
      {DType::Q5_0, {offsetof(BlockQ5_0, d)}, generic::CodesQ5_0::get},
      {DType::Q5_1, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}, generic::CodesQ5_1::get},
      {DType::IQ4_NL, {offsetof(BlockIQ4_NL, d)}, generic::CodesIQ4_NL::get},
      {DType::Q2_K, {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}, generic::CodesQ2_K::get},
      {DType::Q3_K, {offsetof(BlockQ3_K, d)}, generic::CodesQ3_K::get},
      {DType::Q4_K, {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}, generic::CodesQ4_K::get},
      {DType::Q5_K, {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}, generic::CodesQ5_K::get},
      {DType::Q6_K, {offsetof(BlockQ6_K, d)}, generic::CodesQ6_K::get},
      {DType::IQ4_XS, {offsetof(BlockIQ4_XS, d)}, generic::CodesIQ4_XS::get},
  };
  return types;
}

bool is_super_block(DType t) { return dtype_block_size(t) == kQK_K; }

// Column counts: odd numbers of blocks or super-blocks, and a partial activation group for the
// 32-weight types.
std::vector<int64_t> block_cols(DType t) {
  if (is_super_block(t)) return {256, 768, 1280};
  return {32, 96, 224, 1056};
}

// rows x cols weights: every byte `fill`, or random where fill < 0; then small f16 factors.
std::vector<uint8_t> block_weights(const BlockType& bt, int64_t rows, int64_t cols, uint32_t seed,
                                   int fill = -1) {
  const size_t bytes = static_cast<size_t>(rows * row_bytes(bt.t, cols));
  const size_t block = static_cast<size_t>(row_bytes(bt.t, dtype_block_size(bt.t)));
  std::vector<uint8_t> w(bytes);
  std::mt19937 rng(seed);
  for (auto& b : w) b = static_cast<uint8_t>(fill < 0 ? rng() : static_cast<uint32_t>(fill));
  std::uniform_real_distribution<float> factor(-0.05f, 0.05f);
  for (size_t off = 0; off < bytes; off += block) {
    for (size_t f : bt.f16_fields) {
      const uint16_t h = fp32_to_fp16(factor(rng));
      std::memcpy(&w[off + f], &h, sizeof h);
    }
  }
  return w;
}

// Sum over blocks of |isum * D * dx| + |msum * M * dx| (block_codes.h): the scale of the
// rounding errors any evaluation order of the float terms can make.
double magnitude(const BlockType& bt, const uint8_t* w, const uint8_t* x, int64_t cols) {
  const generic::ActQ8 a(x);
  double m = 0;
  for (int64_t b = 0; b < cols / kQK; ++b) {
    generic::BlockCodes c;
    bt.codes(w, b, c);
    double isum = 0, msum = 0;
    for (int j = 0; j < kQK; ++j) {
      isum += c.s[j / 16] * c.q[j] * a.q(b, j);
      msum += c.m[j / 16] * a.q(b, j);
    }
    m += std::fabs(isum * c.d * a.d(b)) + std::fabs(msum * c.mf * a.d(b));
  }
  return m;
}

// Quantized activation rows of nt tokens through a table's to_act.
std::vector<uint8_t> act_rows(const cpu::WeightKernels& k, const std::vector<float>& x,
                              int64_t cols, int64_t nt) {
  const size_t ldx = cpu::act_row_bytes(k.act, cols);
  std::vector<uint8_t> xq(ldx * static_cast<size_t>(nt));
  for (int64_t t = 0; t < nt; ++t) k.to_act(x.data() + t * cols, xq.data() + t * ldx, cols);
  return xq;
}

// One shape of one type on one ISA: all the comparisons of the file header.
void check_shape(cpu::Isa isa, const BlockType& bt, const std::vector<uint8_t>& w, int64_t rows,
                 int64_t cols, const std::vector<float>& x, int64_t nt) {
  const cpu::Kernels ref_table = cpu::select_kernels(cpu::Isa::Scalar);
  const cpu::Kernels table = cpu::select_kernels(isa);
  const cpu::WeightKernels& ref = ref_table.weights(bt.t);
  const cpu::WeightKernels& k = table.weights(bt.t);
  const std::string where = std::string(cpu::isa_name(isa)) + " " + std::string(dtype_name(bt.t)) +
                            " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                            " nt=" + std::to_string(nt);
  ASSERT_EQ(k.act, ref.act) << where;
  if (isa != cpu::Isa::Scalar) {
    ASSERT_NE(k.gemm, ref.gemm) << where << ": still the reference";
  }
  const auto xq = act_rows(k, x, cols, nt);
  ASSERT_EQ(xq, act_rows(ref, x, cols, nt)) << where << ": activation rows";
  const size_t ldw = static_cast<size_t>(row_bytes(bt.t, cols));
  const size_t ldx = cpu::act_row_bytes(k.act, cols);
  const size_t ldy = static_cast<size_t>(rows) + 3;
  std::vector<float> y(ldy * static_cast<size_t>(nt));
  k.gemm(cols, w.data(), ldw, rows, xq.data(), ldx, nt, y.data(), ldy);
  const double terms = static_cast<double>(cols / kQK) + 8.0;
  for (int64_t t = 0; t < nt; ++t) {
    const uint8_t* xt = xq.data() + t * ldx;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* wr = w.data() + r * ldw;
      const float got = y[t * ldy + r];
      const float want = ref.dot(cols, wr, xt);
      const double tol = 2.0 * terms * FLT_EPSILON * magnitude(bt, wr, xt, cols) + 1e-30;
      ASSERT_NEAR(got, want, tol) << where << " r=" << r << " t=" << t;
      const float d = k.dot(cols, wr, xt);
      ASSERT_EQ(std::memcmp(&got, &d, sizeof d), 0)
          << where << " r=" << r << " t=" << t << ": gemm " << got << " dot " << d;
    }
  }
  // Gathered rows: every other row backwards, then row 0 again.
  std::vector<int32_t> idx;
  for (int64_t r = rows - 1; r >= 0; r -= 2) idx.push_back(static_cast<int32_t>(r));
  idx.push_back(0);
  const auto ng = static_cast<int64_t>(idx.size());
  std::vector<float> yg(static_cast<size_t>(ng * nt));
  k.gemm_gather(cols, w.data(), ldw, idx.data(), ng, xq.data(), ldx, nt, yg.data(),
                static_cast<size_t>(ng));
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t j = 0; j < ng; ++j) {
      ASSERT_EQ(std::memcmp(&yg[t * ng + j], &y[t * ldy + idx[j]], sizeof(float)), 0)
          << where << " gathered row " << idx[j] << " t=" << t;
    }
  }
}

TEST(BlockKernels, MatchScalarReference) {
  for (cpu::Isa isa : test::isas()) {
    for (const BlockType& bt : block_types()) {
      for (int64_t cols : block_cols(bt.t)) {
        for (int64_t rows : {1, 3, 17, 67}) {
          const auto w = block_weights(bt, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
          for (int64_t nt : {1, 2, 5, 13, 21}) {
            const auto x = test::random_floats(nt * cols, static_cast<uint32_t>(nt * 31 + cols));
            check_shape(isa, bt, w, rows, cols, x, nt);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Codes at their extremes (every byte 0x00 or 0xff, so the largest or smallest codes and scales)
// against activations at +-127: the products' int16 stages must not saturate, in the tiles (3
// tokens) and in the row panels, whose 16-bit sums run over several products (17 tokens).
TEST(BlockKernels, ExtremeCodesDoNotSaturate) {
  constexpr int64_t kRows = 5, kCols = 512;
  for (int64_t tokens : {3, 17}) {
    std::vector<float> x(static_cast<size_t>(tokens * kCols));
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < kCols; ++i) {
        const float sign = t % 3 == 0 ? 1.0f : t % 3 == 1 ? -1.0f : (i / 16) % 2 ? 1.0f : -1.0f;
        x[static_cast<size_t>(t * kCols + i)] = sign;
      }
    }
    for (cpu::Isa isa : test::isas()) {
      for (const BlockType& bt : block_types()) {
        for (int fill : {0x00, 0xff, 0x0f, 0xf0, 0x88}) {
          const auto w = block_weights(bt, kRows, kCols, static_cast<uint32_t>(fill), fill);
          check_shape(isa, bt, w, kRows, kCols, x, tokens);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Every vector ISA computes the same integers and applies the same float operations to them in the
// same order (the 512-bit engines and the AVX-512 one-token axpy included), so gemm and axpy give
// the AVX2 kernels' bits.
TEST(BlockKernels, VectorIsasGiveTheSameBits) {
  if (!cpu::cpu_supports(cpu::Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  const cpu::Kernels avx2 = cpu::select_kernels(cpu::Isa::Avx2);
  constexpr int64_t kRows = 19, kCols = 1280;
  for (cpu::Isa isa : test::isas()) {
    if (isa == cpu::Isa::Scalar || isa == cpu::Isa::Avx2) continue;
    const cpu::Kernels table = cpu::select_kernels(isa);
    for (const BlockType& bt : block_types()) {
      const std::string where =
          std::string(cpu::isa_name(isa)) + " " + std::string(dtype_name(bt.t));
      const cpu::WeightKernels& base = avx2.weights(bt.t);
      const cpu::WeightKernels& k = table.weights(bt.t);
      const auto w = block_weights(bt, kRows, kCols, 11);
      const size_t ldw = static_cast<size_t>(row_bytes(bt.t, kCols));
      for (int64_t nt : {1, 5, 21}) {
        const auto x = test::random_floats(nt * kCols, static_cast<uint32_t>(nt));
        const auto xq = act_rows(k, x, kCols, nt);
        const size_t ldx = cpu::act_row_bytes(k.act, kCols);
        std::vector<float> y(static_cast<size_t>(kRows * nt)), y_base(y.size());
        k.gemm(kCols, w.data(), ldw, kRows, xq.data(), ldx, nt, y.data(), kRows);
        base.gemm(kCols, w.data(), ldw, kRows, xq.data(), ldx, nt, y_base.data(), kRows);
        EXPECT_EQ(std::memcmp(y.data(), y_base.data(), y.size() * sizeof(float)), 0)
            << where << " gemm nt=" << nt;
        // axpy over every other row, some coefficients exactly zero.
        std::vector<int32_t> idx;
        for (int32_t r = 0; r < kRows; r += 2) idx.push_back(r);
        const auto nr = static_cast<int64_t>(idx.size());
        auto a = test::random_floats(nt * nr, static_cast<uint32_t>(nt + 7));
        for (size_t i = 0; i < a.size(); i += 4) a[i] = 0.0f;
        std::vector<float> out(static_cast<size_t>(nt * kCols), 0.5f), out_base(out);
        k.axpy(kCols, w.data(), ldw, idx.data(), nr, a.data(), static_cast<size_t>(nr), nt,
               out.data(), kCols);
        base.axpy(kCols, w.data(), ldw, idx.data(), nr, a.data(), static_cast<size_t>(nr), nt,
                  out_base.data(), kCols);
        EXPECT_EQ(std::memcmp(out.data(), out_base.data(), out.size() * sizeof(float)), 0)
            << where << " axpy nt=" << nt;
      }
    }
  }
}

}  // namespace
}  // namespace hearth
