// Every path a weight of the block types (Q4_1, Q5_0, Q5_1, IQ4_NL, the K-quants, IQ4_XS) takes,
// through the ops at every ISA this CPU has, on odd sizes: matvec and matmul against a double
// reference on the dequantized weights and the activations as the kernels round them (Q8_0 or
// Q8_K); gather_matmul equal to the same rows of matmul bit for bit; sparse_axpy against a
// double reference within the bound of sequential float summation (plus, for one token of
// Q4_K and Q6_K, that of their 8-bit coefficients: common/axpy_bound.h); the same bits for 1
// and 3 threads.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/context.h"
#include "backend/cpu/kernels/act_layout.h"
#include "common/axpy_bound.h"
#include "common/kernel_test_util.h"
#include "core/quant_blocks.h"
#include "ops/matmul.h"
#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

using test::isas;

constexpr DType kBlockTypes[] = {DType::Q4_1, DType::Q5_0,  DType::Q5_1, DType::IQ4_NL,
                                 DType::Q2_K, DType::Q3_K,  DType::Q4_K, DType::Q5_K,
                                 DType::Q6_K, DType::IQ4_XS};

// Odd numbers of blocks: 1, 3 and 5 super-blocks, or 1, 3, 7 and 33 blocks of 32.
std::vector<int64_t> block_cols(DType t) {
  if (dtype_block_size(t) == kQK_K) return {256, 768, 1280};
  return {32, 96, 224, 1056};
}

// The activation row x as the kernels of `t` see it: quantized by the scalar table's to_act,
// read back as quant * scale.
std::vector<double> rounded_acts(DType t, const float* x, int64_t cols) {
  const cpu::Kernels ref = cpu::select_kernels(cpu::Isa::Scalar);
  std::vector<uint8_t> row(cpu::act_row_bytes(ref.weights(t).act, cols));
  ref.weights(t).to_act(x, row.data(), cols);
  std::vector<double> out(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) {
    float d;
    std::memcpy(&d, row.data() + cpu::act_scale_offset(i / kQK), sizeof d);
    out[i] = static_cast<int8_t>(row[cpu::act_quant_offset(i / kQK, i % kQK)]) * double{d};
  }
  return out;
}

TEST(BlockOps, MatmulMatchesReferenceAndGatherEqualsMatmul) {
  for (cpu::Isa isa : isas()) {
    cpu::CpuContext ctx(2, isa);
    for (DType t : kBlockTypes) {
      for (int64_t cols : block_cols(t)) {
        const int64_t rows = 19, n = 5;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + 7));
        std::vector<float> wf(static_cast<size_t>(rows * cols));
        dequantize_row(t, w.data(), wf.data(), rows * cols);
        const auto x = test::random_floats(n * cols, static_cast<uint32_t>(cols * 3));
        std::vector<float> y(static_cast<size_t>(rows * n));
        matmul(ctx, t, w.data(), rows, cols, x.data(), n, y.data());
        for (int64_t k = 0; k < n; ++k) {
          const auto xr = rounded_acts(t, x.data() + k * cols, cols);
          for (int64_t r = 0; r < rows; ++r) {
            double s = 0, a = 0, wmax = 0, xsum = 0;
            for (int64_t c = 0; c < cols; ++c) {
              s += wf[r * cols + c] * xr[c];
              a += std::fabs(wf[r * cols + c] * xr[c]);
              wmax = std::max(wmax, std::fabs(double{wf[r * cols + c]}));
              xsum += std::fabs(xr[c]);
            }
            // The kernels' integer sums are exact; their float steps (a few per block) and the
            // float rounding of the dequantized weights (d * sc * q - dmin * m can cancel, so
            // its error scales with the block's range, not the weight) bound the difference.
            const double bound = (cols / 16.0 + 8) * FLT_EPSILON * (a + wmax * xsum);
            ASSERT_NEAR(y[k * rows + r], s, bound + 1e-30)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " cols " << cols;
          }
        }
        // matvec gives each token's row of matmul, and gathered rows the same outputs.
        std::vector<float> yv(static_cast<size_t>(rows));
        matvec(ctx, t, w.data(), rows, cols, x.data() + cols, yv.data());
        EXPECT_EQ(std::memcmp(yv.data(), y.data() + rows, yv.size() * 4), 0) << dtype_name(t);
        const std::vector<int32_t> idx = {0, 3, 4, 11, 18};
        std::vector<float> yg(idx.size() * n);
        gather_matmul(ctx, t, w.data(), rows, cols, idx.data(), static_cast<int64_t>(idx.size()),
                      x.data(), n, yg.data());
        for (int64_t k = 0; k < n; ++k) {
          for (size_t j = 0; j < idx.size(); ++j) {
            ASSERT_EQ(yg[k * idx.size() + j], y[k * rows + idx[j]])
                << cpu::isa_name(isa) << " " << dtype_name(t) << " token " << k << " row "
                << idx[j];
          }
        }
      }
    }
  }
}

TEST(BlockOps, SparseAxpyMatchesReferenceForAnyThreadCount) {
  for (cpu::Isa isa : isas()) {
    cpu::CpuContext one(1, isa), three(3, isa);
    for (DType t : kBlockTypes) {
      for (int64_t cols : block_cols(t)) {
        const int64_t rows = 37;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + 1));
        std::vector<float> wf(static_cast<size_t>(rows * cols));
        dequantize_row(t, w.data(), wf.data(), rows * cols);
        std::vector<int32_t> idx(21);
        for (size_t j = 0; j < idx.size(); ++j) idx[j] = static_cast<int32_t>(j * 7 % rows);
        for (int64_t n : {1, 3}) {
          auto a = test::random_floats(n * static_cast<int64_t>(idx.size()), 5);
          for (size_t i = 0; i < a.size(); i += 3) a[i] = 0.0f;  // some exact zeros
          std::vector<float> y1(static_cast<size_t>(n * cols)), y3(y1.size());
          sparse_axpy(one, t, w.data(), rows, cols, idx.data(), static_cast<int64_t>(idx.size()),
                      a.data(), n, y1.data());
          sparse_axpy(three, t, w.data(), rows, cols, idx.data(), static_cast<int64_t>(idx.size()),
                      a.data(), n, y3.data());
          EXPECT_EQ(std::memcmp(y1.data(), y3.data(), y1.size() * 4), 0)
              << cpu::isa_name(isa) << " " << dtype_name(t) << " n " << n;
          for (int64_t k = 0; k < n; ++k) {
            for (int64_t c = 0; c < cols; ++c) {
              double s = 0, abs = 0;
              for (size_t j = 0; j < idx.size(); ++j) {
                const double term = double{a[k * idx.size() + j]} * wf[idx[j] * cols + c];
                s += term;
                abs += std::fabs(term);
              }
              const double quant = test::axpy_int_bound(
                  t, w.data(), static_cast<size_t>(row_bytes(t, cols)), idx.data(),
                  static_cast<int64_t>(idx.size()), a.data(), n, c);
              ASSERT_NEAR(y1[k * cols + c], s, (idx.size() + 2) * FLT_EPSILON * abs + 1e-30 + quant)
                  << cpu::isa_name(isa) << " " << dtype_name(t) << " n " << n << " col " << c;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hearth
