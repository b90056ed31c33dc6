// matvec/matmul through a CpuContext: against a double-precision reference on dequantized
// weights, matmul against matvec, and independence from the thread count. Every (row, token)
// output is computed by the same sequence of operations whatever the tiling or the thread split,
// so the last two comparisons are exact.
#include "ops/matmul.h"

#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/context.h"
#include "common/kernel_test_util.h"
#include "core/error.h"
#include "ops/matmul_common.h"

namespace hearth {
namespace {

using test::isas;

// Reference y[t, r] in double, with activations rounded the way the kernels see them.
std::vector<double> reference(DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                              const std::vector<float>& x, int64_t n, std::vector<double>* abs) {
  std::vector<float> wf(static_cast<size_t>(rows * cols)), xf = x;
  dequantize_row(t, w.data(), wf.data(), rows * cols);
  if (dtype_block_size(t) != 1) {
    std::vector<uint8_t> q(static_cast<size_t>(row_bytes(DType::Q8_0, cols)));
    for (int64_t k = 0; k < n; ++k) {
      quantize_row(DType::Q8_0, x.data() + k * cols, q.data(), cols);
      dequantize_row(DType::Q8_0, q.data(), xf.data() + k * cols, cols);
    }
  }
  std::vector<double> y(static_cast<size_t>(rows * n));
  abs->assign(y.size(), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(wf[r * cols + c]) * xf[k * cols + c];
        s += p;
        a += std::fabs(p);
      }
      y[k * rows + r] = s;
      (*abs)[k * rows + r] = a;
    }
  }
  return y;
}

TEST(Matmul, MatvecAndMatmulMatchReference) {
  for (cpu::Isa isa : isas()) {
    cpu::CpuContext ctx(2, isa);
    for (DType t : test::kAllTypes) {
      for (int64_t cols : test::test_cols(t)) {
        for (int64_t rows : {1, 3, 17, 67}) {
          const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(rows + cols));
          for (int64_t n : {1, 2, 5, 13}) {
            const auto x = test::random_floats(n * cols, static_cast<uint32_t>(n * 31 + cols));
            std::vector<double> abs;
            const auto want = reference(t, w, rows, cols, x, n, &abs);
            std::vector<float> y(static_cast<size_t>(rows * n));
            matmul(ctx, t, w.data(), rows, cols, x.data(), n, y.data());
            const double terms = dtype_block_size(t) == 1 ? cols / 8.0 + 8 : cols / 32.0 + 8;
            for (size_t i = 0; i < y.size(); ++i) {
              ASSERT_NEAR(y[i], want[i], 2.0 * terms * FLT_EPSILON * abs[i] + 1e-30)
                  << cpu::isa_name(isa) << " " << dtype_name(t) << " rows=" << rows
                  << " cols=" << cols << " n=" << n << " i=" << i;
            }
            // Each token of matmul is exactly the matvec of that token.
            std::vector<float> yv(static_cast<size_t>(rows));
            for (int64_t k = 0; k < n; ++k) {
              matvec(ctx, t, w.data(), rows, cols, x.data() + k * cols, yv.data());
              ASSERT_EQ(std::memcmp(yv.data(), y.data() + k * rows, yv.size() * 4), 0)
                  << cpu::isa_name(isa) << " " << dtype_name(t) << " token " << k;
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, ResultsDoNotDependOnThreadCount) {
  for (cpu::Isa isa : isas()) {
    for (DType t : test::kAllTypes) {
      // Big enough that every thread gets rows (the op keeps small products on one thread).
      const int64_t rows = 301, cols = 1024, n = 9;
      const auto w = test::random_weights(t, rows, cols, 77);
      const auto x = test::random_floats(n * cols, 78);
      std::vector<float> first_v, first_m;
      for (int nth = 1; nth <= 4; ++nth) {
        cpu::CpuContext ctx(nth, isa);
        std::vector<float> yv(static_cast<size_t>(rows)), ym(static_cast<size_t>(rows * n));
        matvec(ctx, t, w.data(), rows, cols, x.data(), yv.data());
        matmul(ctx, t, w.data(), rows, cols, x.data(), n, ym.data());
        if (nth == 1) {
          first_v = yv;
          first_m = ym;
          continue;
        }
        ASSERT_EQ(std::memcmp(yv.data(), first_v.data(), yv.size() * 4), 0)
            << cpu::isa_name(isa) << " " << dtype_name(t) << " matvec nth=" << nth;
        ASSERT_EQ(std::memcmp(ym.data(), first_m.data(), ym.size() * 4), 0)
            << cpu::isa_name(isa) << " " << dtype_name(t) << " matmul nth=" << nth;
      }
    }
  }
}

// One token's rows: every row computed exactly once, whatever the thread count, row size and
// the kernel's streams (which make chunks longer), and a thread that falls behind has the end of
// its range taken over by the others.
TEST(Matmul, DecodeRowsAreEachComputedOnceAndLateRangesAreShared) {
  for (int nth = 1; nth <= 4; ++nth) {
    cpu::CpuContext ctx(nth, cpu::Isa::Scalar);
    for (int64_t rows : {1, 5, 257, 10007}) {
      for (size_t row_bytes : {size_t{64}, size_t{1152}, size_t{4096}}) {
        for (int streams : {1, 4}) {
          std::vector<std::atomic<int>> seen(static_cast<size_t>(rows));
          std::atomic<int64_t> calls{0};
          matmul_detail::run_split(
              ctx, rows, 1, row_bytes, 0,
              [&](int64_t r0, int64_t r1, int64_t t0, int64_t tn) {
                ASSERT_EQ(t0, 0);
                ASSERT_EQ(tn, 1);
                ASSERT_LT(r0, r1);
                for (int64_t r = r0; r < r1; ++r) ++seen[r];
                ++calls;
              },
              matmul_detail::kRowQuantum, streams);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(seen[r].load(), 1)
                << "rows=" << rows << " row_bytes=" << row_bytes << " nth=" << nth
                << " streams=" << streams << " row " << r;
          }
          // 10007 rows of 4 KiB are 40 MiB: streams take them in chunks of up to 1 MiB, yet
          // never fewer than kMinChunksPerThread per thread where there are enough rows.
          if (rows == 10007 && row_bytes == 4096 && nth > 1) {
            EXPECT_GE(calls.load(), streams == 1 ? 600 : 40) << "nth=" << nth;
            if (streams > 1) {
              EXPECT_LE(calls.load(), 80) << "nth=" << nth;
            }
          }
        }
      }
    }
  }
  // Two threads; the rows of the first half are slow to compute, so the second thread, done
  // early, must take some of them.
  cpu::CpuContext ctx(2, cpu::Isa::Scalar);
  const int64_t rows = 64 * 1024, row_bytes = 64;  // 64 chunks of 1024 rows
  std::vector<std::thread::id> by(static_cast<size_t>(rows));
  const auto slow_first_half = [&](int64_t r0, int64_t r1, int64_t, int64_t) {
    if (r0 < rows / 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (int64_t r = r0; r < r1; ++r) by[r] = std::this_thread::get_id();
  };
  matmul_detail::run_split(ctx, rows, 1, row_bytes, 0, slow_first_half);
  int64_t shared = 0;
  for (int64_t r = 0; r < rows / 2; ++r) shared += by[r] != by[0] ? 1 : 0;
  EXPECT_GT(shared, 0);
}

TEST(Matmul, FewTokensMatchReferenceMatvecAndEveryThreadCount) {
  // Batched decode sizes: n = 1..9 and around the few-token kernels' limit (16), rows that are
  // not multiples of any tile, columns over several column spans with a ragged tail.
  for (cpu::Isa isa : isas()) {
    for (DType t : test::kAllTypes) {
      const bool per_col = dtype_block_size(t) == 1;
      for (int64_t cols :
           per_col ? std::vector<int64_t>{7, 517, 2053} : std::vector<int64_t>{1056}) {
        for (int64_t rows : {1, 2, 7, 38}) {
          const auto w =
              test::random_weights(t, rows, cols, static_cast<uint32_t>(rows + 3 * cols));
          for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17}) {
            const auto x = test::random_floats(n * cols, static_cast<uint32_t>(n + cols));
            std::vector<double> abs;
            const auto want = reference(t, w, rows, cols, x, n, &abs);
            std::vector<float> first;
            for (int nth : {1, 2, 3}) {
              cpu::CpuContext ctx(nth, isa);
              std::vector<float> y(static_cast<size_t>(rows * n));
              matmul(ctx, t, w.data(), rows, cols, x.data(), n, y.data());
              const std::string where = std::string(cpu::isa_name(isa)) + " " +
                                        std::string(dtype_name(t)) +
                                        " rows=" + std::to_string(rows) +
                                        " cols=" + std::to_string(cols) + " n=" + std::to_string(n);
              if (nth > 1) {
                ASSERT_EQ(std::memcmp(y.data(), first.data(), y.size() * 4), 0)
                    << where << " nth=" << nth;
                continue;
              }
              first = y;
              const double terms = per_col ? cols / 8.0 + 8 : cols / 32.0 + 8;
              for (size_t i = 0; i < y.size(); ++i) {
                ASSERT_NEAR(y[i], want[i], 2.0 * terms * FLT_EPSILON * abs[i] + 1e-30)
                    << where << " i=" << i;
              }
              std::vector<float> yv(static_cast<size_t>(rows));
              for (int64_t k = 0; k < n; ++k) {
                matvec(ctx, t, w.data(), rows, cols, x.data() + k * cols, yv.data());
                ASSERT_EQ(std::memcmp(yv.data(), y.data() + k * rows, yv.size() * 4), 0)
                    << where << " token " << k;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, ManyTokensAcrossTokenBlocks) {
  // More tokens than one L2 token block holds, with few rows (token split) and many (row split).
  for (cpu::Isa isa : isas()) {
    cpu::CpuContext ctx(3, isa);
    for (DType t : {DType::F16, DType::Q4_0}) {
      for (int64_t rows : {5, 97}) {
        const int64_t cols = 4096, n = 101;
        const auto w = test::random_weights(t, rows, cols, 5);
        const auto x = test::random_floats(n * cols, 6);
        std::vector<float> y(static_cast<size_t>(rows * n)), yv(static_cast<size_t>(rows));
        matmul(ctx, t, w.data(), rows, cols, x.data(), n, y.data());
        for (int64_t k = 0; k < n; k += 7) {
          matvec(ctx, t, w.data(), rows, cols, x.data() + k * cols, yv.data());
          ASSERT_EQ(std::memcmp(yv.data(), y.data() + k * rows, yv.size() * 4), 0)
              << dtype_name(t) << " rows=" << rows << " token " << k;
        }
      }
    }
  }
}

// Parts of a shared-input product (q, k, v) split over the pool as one stacked matrix: a
// thread's range may start or end inside any part, and an empty part is allowed. Each part's
// outputs must be the bits of its own matmul, for any thread count.
TEST(Matmul, PartsEqualOneMatmulPerPart) {
  for (cpu::Isa isa : isas()) {
    for (int threads : {1, 2, 3}) {
      cpu::CpuContext ctx(threads, isa);
      for (DType t : test::kAllTypes) {
        const int64_t cols = test::test_cols(t).back();
        const int64_t rows[] = {37, 0, 5, 70};
        std::vector<std::vector<uint8_t>> w;
        for (int64_t r : rows) {
          w.push_back(test::random_weights(t, r, cols, static_cast<uint32_t>(r * 7 + cols)));
        }
        for (int64_t n : {1, 6}) {
          const auto x = test::random_floats(n * cols, static_cast<uint32_t>(n + cols));
          std::vector<std::vector<float>> y, want;
          std::vector<MatmulPart> parts;
          for (size_t i = 0; i < w.size(); ++i) {
            y.emplace_back(static_cast<size_t>(rows[i] * n), -1.0f);
            want.emplace_back(static_cast<size_t>(rows[i] * n), -2.0f);
            matmul(ctx, t, w[i].data(), rows[i], cols, x.data(), n, want[i].data());
          }
          for (size_t i = 0; i < w.size(); ++i) parts.push_back({w[i].data(), rows[i], y[i].data()});
          matmul_parts(ctx, t, cols, parts, x.data(), n);
          for (size_t i = 0; i < w.size(); ++i) {
            if (y[i].empty()) continue;  // memcmp must not see the empty part's null data
            ASSERT_EQ(std::memcmp(y[i].data(), want[i].data(), y[i].size() * sizeof(float)), 0)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " threads=" << threads
                << " n=" << n << " part " << i;
          }
        }
      }
    }
  }
}

TEST(Matmul, EmptyShapesAndBadColumns) {
  cpu::CpuContext ctx(2, cpu::Isa::Scalar);
  float x[64] = {}, y[4] = {1, 2, 3, 4};
  uint8_t w[256] = {};
  matvec(ctx, DType::Q4_0, w, 0, 64, x, y);
  matmul(ctx, DType::F16, w, 2, 32, x, 0, y);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_THROW(matvec(ctx, DType::Q8_0, w, 1, 40, x, y), Error);
  const MatmulPart bad[] = {{w, 1, y}, {w, -1, y}};
  EXPECT_THROW(matmul_parts(ctx, DType::F16, 32, bad, x, 1), Error);
}

TEST(Dispatch, IsaEnvironmentOverride) {
  const char* old = std::getenv("HEARTH_ISA");
  {
    const test::IsaCap cap("scalar");
    EXPECT_EQ(cpu::detect_isa(), cpu::Isa::Scalar);
    cpu::CpuContext ctx(1);
    EXPECT_EQ(ctx.isa(), cpu::Isa::Scalar);
  }
  if (test::cpu_has_avx2()) {
    // HEARTH_ISA=avx2 caps a VNNI machine at plain AVX2.
    const test::IsaCap cap("avx2");
    EXPECT_EQ(cpu::detect_isa(), cpu::Isa::Avx2);
  }
  if (!old) {
    cpu::Isa best = cpu::Isa::Scalar;
    for (cpu::Isa isa : test::kFastIsas) {
      if (test::cpu_supports(isa)) best = isa;
    }
    EXPECT_EQ(cpu::detect_isa(), best);
    // Each named level caps at itself where the CPU has it, never above the best one.
    for (cpu::Isa isa : test::kFastIsas) {
      setenv("HEARTH_ISA", std::string(cpu::isa_name(isa)).c_str(), 1);
      const cpu::Isa got = cpu::detect_isa();
      EXPECT_LE(got, best) << cpu::isa_name(isa);
      EXPECT_LE(got, isa) << cpu::isa_name(isa);
      if (test::cpu_supports(isa)) {
        EXPECT_EQ(got, isa) << cpu::isa_name(isa);
      }
    }
    unsetenv("HEARTH_ISA");
  }
  EXPECT_EQ(cpu::isa_name(cpu::Isa::Avx2), "avx2");
  EXPECT_EQ(cpu::isa_name(cpu::Isa::AvxVnni), "avxvnni");
  EXPECT_EQ(cpu::isa_name(cpu::Isa::Avx512), "avx512");
}

TEST(Dispatch, WeightKernelsPerType) {
  const cpu::Kernels k = cpu::select_kernels(cpu::Isa::Scalar);
  for (DType t : kSupportedTypes) {
    const cpu::WeightKernels& wk = k.weights(t);
    EXPECT_NE(wk.gemm, nullptr);
    EXPECT_NE(wk.gemm_gather, nullptr);
    EXPECT_NE(wk.dot, nullptr);
    EXPECT_NE(wk.to_float, nullptr);
    EXPECT_NE(wk.axpy, nullptr);
    // 32-weight types meet Q8_0-rounded activations, 256-weight ones Q8_K-rounded ones.
    EXPECT_EQ(wk.act == cpu::ActFormat::Q8, dtype_block_size(t) == 32) << dtype_name(t);
    EXPECT_EQ(wk.act == cpu::ActFormat::Q8K, dtype_block_size(t) == 256) << dtype_name(t);
    EXPECT_EQ(wk.to_act != nullptr, wk.act != cpu::ActFormat::F32);
  }
  // ggml types without kernels (q8_1, q8_k, the IQ2/IQ3/IQ1 types) are refused.
  for (uint32_t id : {9u, 15u, 16u, 18u, 19u, 21u, 29u}) {
    EXPECT_FALSE(is_supported_dtype(id)) << id;
    EXPECT_THROW(k.weights(static_cast<DType>(id)), Error) << id;
  }
  EXPECT_EQ(cpu::act_row_bytes(cpu::ActFormat::Q8, 32) % 32, 0u);
  EXPECT_GE(cpu::act_row_bytes(cpu::ActFormat::Q8, 96), 96u + 3 * 8);
}

TEST(Context, ScratchIsAlignedAndGrows) {
  cpu::CpuContext ctx(1, cpu::Isa::Scalar);
  void* a = ctx.scratch(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 100);
  void* b = ctx.scratch(50);
  EXPECT_EQ(a, b);  // no reallocation when it already fits
  void* c = ctx.scratch(1 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 64, 0u);
  std::memset(c, 2, 1 << 20);
}

}  // namespace
}  // namespace hearth
