// Every AVX2 and AVX-VNNI kernel against its scalar reference, for every dtype, on odd sizes.
// Activation quantization and dequantization must match exactly; dot products may differ only by
// float summation order and FMA rounding, bounded relative to the sum of absolute products.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "common/kernel_test_util.h"
#include "core/fp16.h"

namespace hearth {
namespace {

using cpu::ActFormat;
using cpu::Kernels;
using cpu::WeightKernels;

// Activation rows in the format `k` expects, plus per-element magnitudes for error bounds.
struct Acts {
  std::vector<uint8_t> data;
  size_t ld = 0;
  std::vector<float> value;  // the values the kernels effectively multiply (quantized if Q8)
};

Acts make_acts(const WeightKernels& k, int64_t n, int64_t cols, uint32_t seed) {
  Acts a;
  const auto x = test::random_floats(n * cols, seed);
  a.ld = cpu::act_row_bytes(k.act, cols);
  a.data.resize(a.ld * static_cast<size_t>(n));
  a.value = x;
  for (int64_t t = 0; t < n; ++t) {
    if (k.act == ActFormat::F32) {
      std::memcpy(a.data.data() + t * a.ld, x.data() + t * cols, static_cast<size_t>(cols) * 4);
      continue;
    }
    k.to_act(x.data() + t * cols, a.data.data() + t * a.ld, cols);
    // Effective values: ggml Q8_0 quantize + dequantize of the same floats.
    std::vector<uint8_t> q(static_cast<size_t>(row_bytes(DType::Q8_0, cols)));
    quantize_row(DType::Q8_0, x.data() + t * cols, q.data(), cols);
    dequantize_row(DType::Q8_0, q.data(), a.value.data() + t * cols, cols);
  }
  return a;
}

// sum |w_i x_i| over a row pair, in double: the scale of the rounding error of any summation.
double abs_dot(const float* w, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(w[i]) * x[i]);
  return s;
}

double tolerance(DType t, int64_t cols, double abs_sum) {
  // Float types: each of 8 lanes sums cols/8 products. Quantized: integer block sums are
  // exact, and cols/32 scaled block sums are added in float.
  const double terms = dtype_block_size(t) == 1 ? cols / 8.0 + 8 : cols / 32.0 + 8;
  return 2.0 * terms * FLT_EPSILON * abs_sum + 1e-30;
}

// Parameters: the ISA under test and the weight dtype.
class KernelsTest : public ::testing::TestWithParam<std::tuple<cpu::Isa, DType>> {
 protected:
  void SetUp() override {
    const cpu::Isa isa = std::get<0>(GetParam());
    if (!test::cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << cpu::isa_name(isa);
    fast_ = cpu::select_kernels(isa);
    ref_ = cpu::generic::kernels();
  }
  static DType dtype() { return std::get<1>(GetParam()); }
  Kernels fast_, ref_;
};

TEST(KernelsQ8Activations, FastQuantizerIsIdenticalToReference) {
  HEARTH_REQUIRE_AVX2();
  const Kernels fast = cpu::select_kernels(cpu::Isa::Avx2);
  const Kernels ref = cpu::generic::kernels();
  const WeightKernels& f = fast.weights(DType::Q4_0);
  const WeightKernels& r = ref.weights(DType::Q4_0);
  ASSERT_EQ(f.act, ActFormat::Q8);
  ASSERT_EQ(fast.weights(DType::Q8_0).to_act, f.to_act);
  for (int64_t cols : {32, 96, 224, 256, 288, 1056}) {
    auto x = test::random_floats(cols, static_cast<uint32_t>(cols));
    // Exact ties and near-ties of the rounding: amax 127 makes the scale 1.
    if (cols >= 64) {
      const float special[] = {127.0f,       2.5f, -2.5f,  0.5f,    -0.5f, 0.49999997f,
                               -0.49999997f, 1.5f, 126.5f, -126.5f, 0.0f,  -0.0f};
      std::memcpy(x.data() + 32, special, sizeof special);
    }
    const size_t bytes = cpu::act_row_bytes(f.act, cols);
    std::vector<uint8_t> a(bytes, 0), b(bytes, 0);
    f.to_act(x.data(), a.data(), cols);
    r.to_act(x.data(), b.data(), cols);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << "cols=" << cols;
    // The row holds the same quants and (f16-rounded) scales as ggml's Q8_0 blocks, and the
    // padding blocks of the last group are zero.
    std::vector<BlockQ8_0> q(static_cast<size_t>(cols / 32));
    quantize_row(DType::Q8_0, x.data(), q.data(), cols);
    const int64_t padded_blocks = (cols / 32 + 7) / 8 * 8;
    for (int64_t blk = 0; blk < padded_blocks; ++blk) {
      const bool real = blk < cols / 32;
      float d;
      int32_t sum;
      std::memcpy(&d, a.data() + cpu::act_scale_offset(blk), 4);
      std::memcpy(&sum, a.data() + cpu::act_sum_offset(blk), 4);
      ASSERT_EQ(d, real ? fp16_to_fp32(q[blk].d) : 0.0f) << "block " << blk;
      int32_t want_sum = 0;
      for (int64_t j = 0; j < 32; ++j) {
        const auto got = static_cast<int8_t>(a[cpu::act_quant_offset(blk, j)]);
        ASSERT_EQ(got, real ? q[blk].qs[j] : 0) << "block " << blk << " quant " << j;
        want_sum += got;
      }
      ASSERT_EQ(sum, want_sum) << "block " << blk;
    }
  }
}

// The super-block types' activation rows (ActFormat::Q8K): the AVX2 quantizer writes the
// reference's bytes, and each block's sums are those of its first and last 16 quants (Q2_K's
// minimum term reads them).
TEST(KernelsQ8KActivations, FastQuantizerIsIdenticalToReferenceWithSumsOf16) {
  HEARTH_REQUIRE_AVX2();
  const Kernels fast = cpu::select_kernels(cpu::Isa::Avx2);
  const Kernels ref = cpu::generic::kernels();
  const WeightKernels& f = fast.weights(DType::Q2_K);
  const WeightKernels& r = ref.weights(DType::Q2_K);
  ASSERT_EQ(f.act, ActFormat::Q8K);
  for (int64_t cols : {256, 512, 1280}) {
    const auto x = test::random_floats(cols, static_cast<uint32_t>(cols));
    const size_t bytes = cpu::act_row_bytes(f.act, cols);
    std::vector<uint8_t> a(bytes, 0), b(bytes, 0);
    f.to_act(x.data(), a.data(), cols);
    r.to_act(x.data(), b.data(), cols);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << "cols=" << cols;
    for (int64_t blk = 0; blk < cols / 32; ++blk) {
      for (int64_t h = 0; h < 2; ++h) {
        int32_t want = 0;
        for (int64_t j = 16 * h; j < 16 * h + 16; ++j) {
          want += static_cast<int8_t>(a[cpu::act_quant_offset(blk, j)]);
        }
        int16_t got;
        std::memcpy(&got, a.data() + cpu::act_sum16_offset(blk, h), 2);
        ASSERT_EQ(got, want) << "cols=" << cols << " block " << blk << " half " << h;
      }
    }
  }
}

TEST_P(KernelsTest, ToFloatIsIdentical) {
  const DType t = dtype();
  for (int64_t cols : test::test_cols(t)) {
    const auto w = test::random_weights(t, 1, cols, 3);
    std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols)),
        c(static_cast<size_t>(cols));
    fast_.weights(t).to_float(w.data(), a.data(), cols);
    ref_.weights(t).to_float(w.data(), b.data(), cols);
    dequantize_row(t, w.data(), c.data(), cols);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "cols=" << cols;
    ASSERT_EQ(std::memcmp(b.data(), c.data(), a.size() * 4), 0) << "cols=" << cols;
  }
}

TEST_P(KernelsTest, DotMatchesReference) {
  const DType t = dtype();
  for (int64_t cols : test::test_cols(t)) {
    const auto w = test::random_weights(t, 1, cols, 17);
    std::vector<float> wf(static_cast<size_t>(cols));
    dequantize_row(t, w.data(), wf.data(), cols);
    const Acts a = make_acts(fast_.weights(t), 1, cols, 23);
    const float got = fast_.weights(t).dot(cols, w.data(), a.data.data());
    const float want = ref_.weights(t).dot(cols, w.data(), a.data.data());
    const double tol = tolerance(t, cols, abs_dot(wf.data(), a.value.data(), cols));
    EXPECT_NEAR(got, want, tol) << dtype_name(t) << " cols=" << cols;
  }
}

TEST_P(KernelsTest, GemmMatchesReferenceAndDoubleSum) {
  const DType t = dtype();
  for (int64_t cols : test::test_cols(t)) {
    for (int64_t rows : {1, 3, 17, 67}) {
      for (int64_t n : {1, 2, 5, 13}) {
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        std::vector<float> wf(static_cast<size_t>(rows * cols));
        dequantize_row(t, w.data(), wf.data(), rows * cols);
        const Acts a = make_acts(fast_.weights(t), n, cols, static_cast<uint32_t>(n + cols));
        // Output rows padded (ldy > rows) to catch writes outside the tile.
        const size_t ldy = static_cast<size_t>(rows + 3);
        std::vector<float> got(ldy * n, -7.0f), want(ldy * n, -7.0f);
        fast_.weights(t).gemm(cols, w.data(), ldw, rows, a.data.data(), a.ld, n, got.data(), ldy);
        ref_.weights(t).gemm(cols, w.data(), ldw, rows, a.data.data(), a.ld, n, want.data(), ldy);
        for (int64_t tk = 0; tk < n; ++tk) {
          for (int64_t r = 0; r < static_cast<int64_t>(ldy); ++r) {
            const size_t i = tk * ldy + r;
            if (r >= rows) {
              ASSERT_EQ(got[i], -7.0f) << "write outside the output";
              continue;
            }
            const float* wr = wf.data() + r * cols;
            const float* xr = a.value.data() + tk * cols;
            double exact = 0;
            for (int64_t c = 0; c < cols; ++c) exact += static_cast<double>(wr[c]) * xr[c];
            const double tol = tolerance(t, cols, abs_dot(wr, xr, cols));
            ASSERT_NEAR(got[i], want[i], tol)
                << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n;
            ASSERT_NEAR(got[i], exact, tol)
                << dtype_name(t) << " rows=" << rows << " cols=" << cols << " n=" << n;
          }
        }
      }
    }
  }
}

TEST(ScalarKernels, GemmMatchesDoubleSum) {
  // The reference itself; runs without AVX2 too.
  const Kernels ref = cpu::generic::kernels();
  for (DType t : test::kAllTypes) {
    const int64_t rows = 5, cols = 96, n = 3;
    const auto w = test::random_weights(t, rows, cols, 99);
    std::vector<float> wf(static_cast<size_t>(rows * cols));
    dequantize_row(t, w.data(), wf.data(), rows * cols);
    const Acts a = make_acts(ref.weights(t), n, cols, 5);
    std::vector<float> y(static_cast<size_t>(rows * n));
    ref.weights(t).gemm(cols, w.data(), static_cast<size_t>(row_bytes(t, cols)), rows,
                        a.data.data(), a.ld, n, y.data(), rows);
    for (int64_t tk = 0; tk < n; ++tk) {
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0;
        for (int64_t c = 0; c < cols; ++c) {
          exact += static_cast<double>(wf[r * cols + c]) * a.value[tk * cols + c];
        }
        const double tol = tolerance(t, cols, abs_dot(&wf[r * cols], &a.value[tk * cols], cols));
        EXPECT_NEAR(y[tk * rows + r], exact, tol) << dtype_name(t);
      }
    }
  }
}

TEST(KernelsFp16Rows, MatchScalar) {
  HEARTH_REQUIRE_AVX2();
  const Kernels fast = cpu::select_kernels(cpu::Isa::Avx2);
  for (int64_t n : {1, 7, 8, 9, 100}) {
    auto x = test::random_floats(n, 1, 1000.0f);
    std::vector<uint16_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    fast.fp32_to_fp16_row(x.data(), a.data(), n);
    cpu::generic::fp32_to_fp16_row(x.data(), b.data(), n);
    ASSERT_EQ(a, b);
    std::vector<float> fa(static_cast<size_t>(n)), fb(static_cast<size_t>(n));
    fast.fp16_to_fp32_row(a.data(), fa.data(), n);
    cpu::generic::fp16_to_fp32_row(a.data(), fb.data(), n);
    ASSERT_EQ(std::memcmp(fa.data(), fb.data(), fa.size() * 4), 0);
  }
}

TEST(KernelsVnni, QuantizedGemmIsIdenticalToAvx2) {
  // VNNI (AVX-VNNI or AVX512-VNNI) only changes how the exact integer block sums are formed, so
  // every output must equal the AVX2 kernel's bit for bit, for every tile shape: few tokens (pair
  // tiles) and many (the row panels, with a partial last panel and token pass), over contiguous
  // and gathered rows; and every token of a product must equal AVX2's one-token dot (the tiles).
  if (!test::cpu_has_avx2()) GTEST_SKIP() << "CPU lacks AVX2";
  const Kernels avx2 = cpu::select_kernels(cpu::Isa::Avx2);
  int tested = 0;
  for (cpu::Isa isa : {cpu::Isa::AvxVnni, cpu::Isa::Avx512}) {
    if (!test::cpu_supports(isa)) continue;
    ++tested;
    const Kernels vnni = cpu::select_kernels(isa);
    for (DType t : {DType::Q8_0, DType::Q4_0}) {
      for (int64_t cols : {32, 288, 1056}) {
        for (int64_t rows : {13, 37}) {
          const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + rows));
          const auto ldw = static_cast<size_t>(row_bytes(t, cols));
          // Every third row, ascending, as a sparse gather picks them.
          std::vector<int32_t> idx;
          for (int32_t r = 1; r < rows; r += 3) idx.push_back(r);
          const auto ni = static_cast<int64_t>(idx.size());
          for (int64_t n : {1, 6, 16, 17, 45}) {
            const Acts a = make_acts(avx2.weights(t), n, cols, 11);
            std::vector<float> got(static_cast<size_t>(rows * n)), want(got.size());
            vnni.weights(t).gemm(cols, w.data(), ldw, rows, a.data.data(), a.ld, n, got.data(),
                                 rows);
            avx2.weights(t).gemm(cols, w.data(), ldw, rows, a.data.data(), a.ld, n, want.data(),
                                 rows);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                << " rows=" << rows << " n=" << n;
            for (int64_t tk = 0; tk < n; ++tk) {
              for (int64_t r = 0; r < rows; ++r) {
                const float d =
                    avx2.weights(t).dot(cols, w.data() + r * ldw, a.data.data() + tk * a.ld);
                ASSERT_EQ(std::memcmp(&got[tk * rows + r], &d, 4), 0)
                    << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                    << " rows=" << rows << " n=" << n << " token " << tk << " row " << r;
              }
            }
            got.assign(static_cast<size_t>(ni * n), 0.0f);
            want.assign(got.size(), 0.0f);
            vnni.weights(t).gemm_gather(cols, w.data(), ldw, idx.data(), ni, a.data.data(), a.ld, n,
                                        got.data(), ni);
            avx2.weights(t).gemm_gather(cols, w.data(), ldw, idx.data(), ni, a.data.data(), a.ld, n,
                                        want.data(), ni);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " gathered, cols=" << cols
                << " rows=" << rows << " n=" << n;
          }
        }
        const int64_t rows = 13;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols));
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        const Acts a = make_acts(avx2.weights(t), 1, cols, 11);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(vnni.weights(t).dot(cols, w.data() + r * ldw, a.data.data()),
                    avx2.weights(t).dot(cols, w.data() + r * ldw, a.data.data()))
              << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols << " row=" << r;
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "CPU lacks AVX-VNNI and AVX512-VNNI";
}

TEST(KernelsQuant, ExtremeCodesDoNotSaturateInPanels) {
  // Every code byte at an extreme (Q4_0 nibbles 0 or 15, Q8_0 bytes -128, -1, 127, 0) against
  // activations at +-127 over 17 tokens (row panels, whose 16-bit sums span several products on
  // AVX2): each output must still equal the one-token dot's bits.
  constexpr int64_t kRows = 5, kCols = 512, kTokens = 17;
  std::vector<float> x(static_cast<size_t>(kTokens * kCols));
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t i = 0; i < kCols; ++i) {
      x[static_cast<size_t>(t * kCols + i)] = t % 3 == 0     ? 1.0f
                                              : t % 3 == 1   ? -1.0f
                                              : (i / 16) % 2 ? 1.0f
                                                             : -1.0f;
    }
  }
  const uint16_t d = fp32_to_fp16(0.03f);
  for (cpu::Isa isa : test::isas()) {
    const Kernels k = cpu::select_kernels(isa);
    for (DType t : {DType::Q4_0, DType::Q8_0}) {
      const WeightKernels& wk = k.weights(t);
      const auto ldw = static_cast<size_t>(row_bytes(t, kCols));
      const size_t block = static_cast<size_t>(row_bytes(t, kQK));
      const auto ldx = static_cast<size_t>(cpu::act_q8_row_bytes(kCols));
      std::vector<uint8_t> xq(ldx * kTokens);
      for (int64_t tk = 0; tk < kTokens; ++tk) {
        wk.to_act(x.data() + tk * kCols, xq.data() + tk * ldx, kCols);
      }
      for (int fill : {0x00, 0xff, 0x80, 0x7f, 0x0f, 0xf0}) {
        std::vector<uint8_t> w(ldw * kRows, static_cast<uint8_t>(fill));
        for (size_t off = 0; off < w.size(); off += block) std::memcpy(&w[off], &d, sizeof d);
        std::vector<float> y(static_cast<size_t>(kRows * kTokens));
        wk.gemm(kCols, w.data(), ldw, kRows, xq.data(), ldx, kTokens, y.data(), kRows);
        for (int64_t tk = 0; tk < kTokens; ++tk) {
          for (int64_t r = 0; r < kRows; ++r) {
            const float want = wk.dot(kCols, w.data() + r * ldw, xq.data() + tk * ldx);
            ASSERT_EQ(std::memcmp(&y[tk * kRows + r], &want, 4), 0)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " fill " << fill << " token " << tk
                << ": " << y[tk * kRows + r] << " against " << want;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, KernelsTest,
                         ::testing::Combine(::testing::ValuesIn(test::kFastIsas),
                                            ::testing::ValuesIn(test::kAllTypes)),
                         [](const auto& info) {
                           return std::string(cpu::isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace hearth
