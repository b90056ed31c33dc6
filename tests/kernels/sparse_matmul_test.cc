// The neuron-sparse kernels and ops (gemm_gather, axpy, gather_matmul, sparse_axpy) for every
// dtype and every ISA this CPU has. gemm_gather must equal gemm bit for bit (an all-active sparse
// FFN is the dense one). axpy sums its rows in float in ascending order: the scalar reference
// (unfused y += a * w) and the FMA variants are held to a double-precision reference within
// (terms + 2) * FLT_EPSILON times the sum of absolute terms, the bound of sequential float
// summation; the ops must give the same bits for any thread count.
#include "ops/sparse_matmul.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "backend/cpu/context.h"
#include "common/axpy_bound.h"
#include "common/kernel_test_util.h"
#include "core/error.h"
#include "core/fp16.h"
#include "ops/matmul.h"

namespace hearth {
namespace {

using test::isas;

// k distinct row numbers of [0, rows), ascending, with gaps.
std::vector<int32_t> random_idx(int64_t rows, int64_t k, uint32_t seed) {
  std::vector<int32_t> all(static_cast<size_t>(rows));
  std::iota(all.begin(), all.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(k));
  std::sort(all.begin(), all.end());
  return all;
}

// k of `rows` row indices shaped like a hot-first model's active set: a run of consecutive rows,
// then every other row (needs rows >= 2k). One-token gathers read runs and scattered rows in
// different tile shapes, which must give the same bits.
std::vector<int32_t> run_then_gaps_idx(int64_t k) {
  std::vector<int32_t> idx;
  for (int64_t j = 0; j < k / 2; ++j) idx.push_back(static_cast<int32_t>(j));
  for (int64_t j = k / 2; j < k; ++j) {
    idx.push_back(static_cast<int32_t>(k / 2 + 2 * (j - k / 2) + 1));
  }
  return idx;
}

// Activation rows in the format `k` multiplies.
std::vector<uint8_t> to_acts(const cpu::WeightKernels& k, const std::vector<float>& x, int64_t n,
                             int64_t cols, size_t* ld) {
  *ld = cpu::act_row_bytes(k.act, cols);
  std::vector<uint8_t> out(*ld * static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    if (k.act == cpu::ActFormat::F32) {
      std::memcpy(out.data() + t * *ld, x.data() + t * cols, static_cast<size_t>(cols) * 4);
    } else {
      k.to_act(x.data() + t * cols, out.data() + t * *ld, cols);
    }
  }
  return out;
}

std::vector<float> dequantized(DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  std::vector<float> f(static_cast<size_t>(rows * cols));
  dequantize_row(t, w.data(), f.data(), rows * cols);
  return f;
}

// Coefficients [nt, nr] with exact zeros: about a third of the entries at random, and every row
// j with j % 4 == 1 zero for all tokens (a skipped row).
std::vector<float> sparse_coefficients(int64_t nt, int64_t nr, uint32_t seed) {
  auto a = test::random_floats(nt * nr, seed);
  std::mt19937 rng(seed + 1);
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t j = 0; j < nr; ++j) {
      if (j % 4 == 1 || rng() % 3 == 0) a[t * nr + j] = 0.0f;
    }
  }
  return a;
}

std::vector<int64_t> gather_cols(DType t) {
  std::vector<int64_t> cols = {32, 96, 224, 1056};
  if (dtype_block_size(t) == 1) cols.insert(cols.end(), {37, 101});
  return cols;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// One-token Q4_0 axpy rounds its coefficients to int8 (common/axpy_bound.h).
double coef_quant_bound(DType t, const uint8_t* w, size_t ldw, const int32_t* idx, int64_t nr,
                        const float* a, int64_t nt, int64_t c) {
  return test::axpy_int_bound(t, w, ldw, idx, nr, a, nt, c);
}

TEST(SparseKernels, EveryIsaFillsTheSparseEntries) {
  for (cpu::Isa isa : isas()) {
    const cpu::Kernels k = cpu::select_kernels(isa);
    for (DType t : test::kAllTypes) {
      EXPECT_NE(k.weights(t).gemm_gather, nullptr) << cpu::isa_name(isa) << dtype_name(t);
      EXPECT_NE(k.weights(t).axpy, nullptr) << cpu::isa_name(isa) << dtype_name(t);
    }
  }
}

TEST(SparseKernels, GemmGatherEqualsGemmBitForBit) {
  for (cpu::Isa isa : isas()) {
    const cpu::Kernels ks = cpu::select_kernels(isa);
    for (DType t : test::kAllTypes) {
      const cpu::WeightKernels& k = ks.weights(t);
      for (int64_t cols : gather_cols(t)) {
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        for (int64_t nr : {1, 3, 17, 67}) {
          const int64_t rows = 2 * nr + 5;
          const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + nr));
          for (const auto& idx :
               {random_idx(rows, nr, static_cast<uint32_t>(nr)), run_then_gaps_idx(nr)}) {
            for (int64_t nt : {1, 2, 5, 13}) {
              size_t ldx = 0;
              const auto x = to_acts(k, test::random_floats(nt * cols, static_cast<uint32_t>(nt)),
                                     nt, cols, &ldx);
              std::vector<float> dense(static_cast<size_t>(rows * nt)),
                  y(static_cast<size_t>(nr * nt));
              k.gemm(cols, w.data(), ldw, rows, x.data(), ldx, nt, dense.data(), rows);
              k.gemm_gather(cols, w.data(), ldw, idx.data(), nr, x.data(), ldx, nt, y.data(), nr);
              for (int64_t tok = 0; tok < nt; ++tok) {
                for (int64_t j = 0; j < nr; ++j) {
                  ASSERT_TRUE(same_bits(y[tok * nr + j], dense[tok * rows + idx[j]]))
                      << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                      << " nr=" << nr << " nt=" << nt << " token " << tok << " j " << j;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(SparseKernels, AxpyMatchesReferenceAndScalar) {
  const cpu::Kernels scalar = cpu::select_kernels(cpu::Isa::Scalar);
  for (cpu::Isa isa : isas()) {
    const cpu::Kernels ks = cpu::select_kernels(isa);
    for (DType t : test::kAllTypes) {
      for (int64_t cols : gather_cols(t)) {
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        for (int64_t nr : {1, 3, 17, 67}) {
          const int64_t rows = 2 * nr + 5;
          const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols * nr));
          const auto wf = dequantized(t, w, rows, cols);
          const auto idx = random_idx(rows, nr, static_cast<uint32_t>(nr + 1));
          for (int64_t nt : {1, 2, 5, 13}) {
            const auto a = sparse_coefficients(nt, nr, static_cast<uint32_t>(nt * 7 + nr));
            const auto y0 = test::random_floats(nt * cols, static_cast<uint32_t>(nt + cols));
            auto y = y0, ys = y0;
            ks.weights(t).axpy(cols, w.data(), ldw, idx.data(), nr, a.data(), nr, nt, y.data(),
                               cols);
            scalar.weights(t).axpy(cols, w.data(), ldw, idx.data(), nr, a.data(), nr, nt, ys.data(),
                                   cols);
            for (int64_t tok = 0; tok < nt; ++tok) {
              for (int64_t c = 0; c < cols; ++c) {
                double want = y0[tok * cols + c], abs = std::fabs(want);
                for (int64_t j = 0; j < nr; ++j) {
                  const double p = static_cast<double>(a[tok * nr + j]) * wf[idx[j] * cols + c];
                  want += p;
                  abs += std::fabs(p);
                }
                const double tol = (nr + 2) * FLT_EPSILON * abs + 1e-30;
                const double quant =
                    coef_quant_bound(t, w.data(), ldw, idx.data(), nr, a.data(), nt, c);
                const size_t i = static_cast<size_t>(tok * cols + c);
                ASSERT_NEAR(y[i], want, tol + quant)
                    << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                    << " nr=" << nr << " nt=" << nt;
                // Scalar and vector variants quantize the same way: only float rounding apart.
                ASSERT_NEAR(y[i], ys[i], 2 * tol) << cpu::isa_name(isa) << " vs scalar";
              }
            }
          }
        }
      }
    }
  }
}

// The one-token axpy of Q4_0, Q8_0, Q4_K and Q6_K sums in integers, and every vector ISA gets
// there its own way (Q4_0 with AVX2: chunks of 8 blocks, scales read through general registers,
// nibbles split; with AVX-512: chunks of 16 blocks, scales by word permutes, with masked loads for
// a last chunk of under 8 or 16 blocks, whole bytes summed; Q8_0 by 16-bit pair products in AVX2
// and offset bytes in 512-bit vpdpbusd; the K-quants in 256- or 512-bit transposed quads) into
// the same integer sums and float steps: the outputs must be the same bits on every vector ISA.
// Column counts give Q4_0 and Q8_0 chunks of 1 to 17 blocks, and 1 to 5 super-blocks.
TEST(SparseKernels, OneTokenIntegerAxpyIsTheSameBitsOnEveryVectorIsa) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const bool legacy = t == DType::Q4_0 || t == DType::Q8_0;
    const std::vector<int64_t> all_cols =
        legacy ? std::vector<int64_t>{32, 96, 224, 256, 288, 480, 512, 544, 1056}
               : std::vector<int64_t>{256, 768, 1280};
    for (int64_t cols : all_cols) {
      const auto ldw = static_cast<size_t>(row_bytes(t, cols));
      for (int64_t nr : {1, 5, 33, 70}) {
        const int64_t rows = 2 * nr + 3;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + nr));
        const auto idx = random_idx(rows, nr, static_cast<uint32_t>(nr + 3));
        const auto a = sparse_coefficients(1, nr, static_cast<uint32_t>(nr * 5 + cols));
        const auto y0 = test::random_floats(cols, static_cast<uint32_t>(cols));
        std::vector<float> first;
        for (cpu::Isa isa : isas()) {
          if (isa == cpu::Isa::Scalar) continue;
          auto y = y0;
          cpu::select_kernels(isa).weights(t).axpy(cols, w.data(), ldw, idx.data(), nr, a.data(),
                                                   nr, 1, y.data(), cols);
          if (first.empty()) {
            first = y;
            continue;
          }
          for (int64_t c = 0; c < cols; ++c) {
            ASSERT_TRUE(same_bits(y[c], first[c]))
                << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols << " nr=" << nr
                << " c=" << c << ": " << y[c] << " vs " << first[c];
          }
        }
      }
    }
  }
}

// Each of those against the scalar reference and a double one: the reference computes the same
// integers, so the two are only float rounding apart (the vector kernels' final FMA), and both
// are within the 8-bit coefficients' bound of the exact sum.
TEST(SparseKernels, OneTokenIntegerAxpyMatchesTheScalarReference) {
  const cpu::Kernels scalar = cpu::select_kernels(cpu::Isa::Scalar);
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    for (int64_t cols : {256, 1280}) {
      const auto ldw = static_cast<size_t>(row_bytes(t, cols));
      for (int64_t nr : {1, 7, 33, 70}) {
        const int64_t rows = 2 * nr + 5;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols * nr + 1));
        const auto wf = dequantized(t, w, rows, cols);
        const auto idx = random_idx(rows, nr, static_cast<uint32_t>(nr + 9));
        const auto a = sparse_coefficients(1, nr, static_cast<uint32_t>(nr * 3 + cols));
        const auto y0 = test::random_floats(cols, static_cast<uint32_t>(cols + 5));
        auto ys = y0;
        scalar.weights(t).axpy(cols, w.data(), ldw, idx.data(), nr, a.data(), nr, 1, ys.data(),
                               cols);
        for (cpu::Isa isa : isas()) {
          auto y = y0;
          cpu::select_kernels(isa).weights(t).axpy(cols, w.data(), ldw, idx.data(), nr, a.data(),
                                                   nr, 1, y.data(), cols);
          for (int64_t c = 0; c < cols; ++c) {
            double want = y0[c], abs = std::fabs(want);
            for (int64_t j = 0; j < nr; ++j) {
              const double p = static_cast<double>(a[j]) * wf[idx[j] * cols + c];
              want += p;
              abs += std::fabs(p);
            }
            const double tol = (nr + 2) * FLT_EPSILON * abs + 1e-30;
            const double quant = coef_quant_bound(t, w.data(), ldw, idx.data(), nr, a.data(), 1, c);
            ASSERT_NEAR(y[c], want, tol + quant)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols << " nr=" << nr;
            const double groups = static_cast<double>(nr / 32 + 1);
            const double steps =
                std::fabs(y0[c]) +
                test::axpy_int_magnitude(t, w.data(), ldw, idx.data(), nr, a.data(), c);
            ASSERT_NEAR(y[c], ys[c], 2 * (groups + 1) * FLT_EPSILON * steps)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " vs scalar, c=" << c;
          }
        }
      }
    }
  }
}

// axpy_parts (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K) is one axpy call per part, to the bit:
// parts of odd lengths (groups of 32 active rows must restart at each part; a float walk's passes
// must not span two parts), empty parts, and a part whose coefficients are all zero, against the
// same table's axpy.
TEST(SparseKernels, AxpyPartsIsOneAxpyPerPart) {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K})
    for (cpu::Isa isa : isas()) {
      const cpu::Kernels ks = cpu::select_kernels(isa);
      const cpu::WeightKernels& k = ks.weights(t);
      ASSERT_NE(k.axpy_parts, nullptr) << cpu::isa_name(isa);
      const bool is_float = t == DType::F32 || t == DType::F16 || t == DType::BF16;
      const bool is_legacy = t == DType::Q4_0 || t == DType::Q8_0;
      for (int64_t cols : is_float    ? std::vector<int64_t>{1, 37, 203}
                          : is_legacy ? std::vector<int64_t>{32, 288, 1056}
                                      : std::vector<int64_t>{256, 768}) {
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        const int64_t nr = 151, rows = 2 * nr + 3;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + 7));
        const auto idx = random_idx(rows, nr, 11);
        auto a = sparse_coefficients(1, nr, static_cast<uint32_t>(cols));
        std::fill(a.begin() + 100, a.begin() + 117, 0.0f);  // the part [100, 117) reads nothing
        for (const std::vector<int64_t>& ends : {std::vector<int64_t>{nr},
                                                 {37, 37, 100, 117, nr},
                                                 {0, 64, 65, 100, 117, 150, nr},
                                                 {33, nr, nr}}) {
          const auto n_parts = static_cast<int64_t>(ends.size());
          std::vector<float> y(static_cast<size_t>(n_parts * cols), 0.0f), want = y;
          k.axpy_parts(cols, w.data(), ldw, idx.data(), a.data(), ends.data(), n_parts, y.data(),
                       cols);
          int64_t begin = 0;
          for (int64_t p = 0; p < n_parts; ++p) {
            k.axpy(cols, w.data(), ldw, idx.data() + begin, ends[p] - begin, a.data() + begin,
                   ends[p] - begin, 1, want.data() + p * cols, cols);
            begin = ends[p];
          }
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_TRUE(same_bits(y[i], want[i]))
                << cpu::isa_name(isa) << " cols=" << cols << " parts=" << n_parts << " i=" << i
                << ": " << y[i] << " vs " << want[i];
          }
        }
      }
    }
}

// One token's own one-token axpy from y over the rows idx[j] whose coefficient a[j] is not zero
// (idx.size() of them listed): what a several-token kernel must give that token.
std::vector<float> own_axpy(const cpu::WeightKernels& k, int64_t cols,
                            const std::vector<uint8_t>& w, size_t ldw,
                            const std::vector<int32_t>& idx, const float* a,
                            std::vector<float> y) {
  std::vector<int32_t> own_idx;
  std::vector<float> own_a;
  for (size_t j = 0; j < idx.size(); ++j) {
    if (a[j] == 0.0f) continue;
    own_idx.push_back(idx[j]);
    own_a.push_back(a[j]);
  }
  const auto own = static_cast<int64_t>(own_idx.size());
  k.axpy(cols, w.data(), ldw, own_idx.data(), own, own_a.data(), own, 1, y.data(), cols);
  return y;
}

// Several tokens of float rows go through a column-blocked product (up to 6 or 12 tokens' sums
// in registers), one token through a row walk: each token's output must be the bits the one-token
// kernel gives over its own rows alone, from any starting y, since sparse_axpy_each sums a block
// of tokens over the union of their rows (zero coefficients where a token has none). Column
// counts give every tail of 8 and 16 lanes; token counts cover partial register blocks.
TEST(SparseKernels, FloatAxpyOfSeveralTokensIsEachTokensOwnAxpy) {
  for (cpu::Isa isa : isas()) {
    const cpu::Kernels ks = cpu::select_kernels(isa);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      const cpu::WeightKernels& k = ks.weights(t);
      for (int64_t cols : {1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 101}) {
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        const int64_t nr = 150, rows = 2 * nr + 1;  // more rows than a kernel's row block
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + 3));
        const auto idx = random_idx(rows, nr, static_cast<uint32_t>(cols));
        for (int64_t nt : {2, 5, 7, 13, 25}) {
          const auto a = sparse_coefficients(nt, nr, static_cast<uint32_t>(nt + cols));
          const auto y0 = test::random_floats(nt * cols, static_cast<uint32_t>(nt * cols));
          auto y = y0;
          k.axpy(cols, w.data(), ldw, idx.data(), nr, a.data(), nr, nt, y.data(), cols);
          for (int64_t tok = 0; tok < nt; ++tok) {
            const std::vector<float> want = own_axpy(
                k, cols, w, ldw, idx, a.data() + tok * nr,
                std::vector<float>(y0.begin() + tok * cols, y0.begin() + (tok + 1) * cols));
            ASSERT_EQ(std::memcmp(want.data(), y.data() + tok * cols, want.size() * 4), 0)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                << " tokens=" << nt << " token " << tok;
          }
        }
      }
    }
  }
}

// axpy_dense (coefficients token-fastest, every row read, y overwritten) against each token's
// own axpy of its non-zero coefficients into zeros: the same bits, on odd column counts (vector
// tails), more rows than a row block, token counts around the register tiles.
TEST(SparseKernels, FloatDenseAxpyIsEachTokensOwnAxpyIntoZeros) {
  for (cpu::Isa isa : isas()) {
    const cpu::Kernels ks = cpu::select_kernels(isa);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      const cpu::WeightKernels& k = ks.weights(t);
      ASSERT_NE(k.axpy_dense, nullptr) << cpu::isa_name(isa) << " " << dtype_name(t);
      for (int64_t cols : {1, 7, 17, 33, 101}) {
        const auto ldw = static_cast<size_t>(row_bytes(t, cols));
        const int64_t nr = 150, rows = 2 * nr + 1;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols + 5));
        const auto idx = random_idx(rows, nr, static_cast<uint32_t>(cols + 1));
        for (int64_t nt : {1, 6, 13, 25}) {
          const auto a = sparse_coefficients(nt, nr, static_cast<uint32_t>(nt + 3 * cols));
          std::vector<float> packed(static_cast<size_t>(nr * nt));
          for (int64_t tok = 0; tok < nt; ++tok) {
            for (int64_t j = 0; j < nr; ++j) packed[j * nt + tok] = a[tok * nr + j];
          }
          std::vector<float> y(static_cast<size_t>(nt * cols), std::nanf(""));
          k.axpy_dense(cols, w.data(), ldw, idx.data(), nr, packed.data(), nt, nt, y.data(), cols);
          for (int64_t tok = 0; tok < nt; ++tok) {
            const std::vector<float> want = own_axpy(k, cols, w, ldw, idx, a.data() + tok * nr,
                                                     std::vector<float>(cols, 0.0f));
            ASSERT_EQ(std::memcmp(want.data(), y.data() + tok * cols, want.size() * 4), 0)
                << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                << " tokens=" << nt << " token " << tok;
          }
        }
      }
    }
  }
}

// Rows whose coefficients are all zero are poisoned with NaN: reading them would turn the
// output into NaN (0 * NaN), so finite, unchanged outputs show they were skipped.
TEST(SparseKernels, AxpySkipsRowsWithZeroCoefficients) {
  for (cpu::Isa isa : isas()) {
    const cpu::Kernels ks = cpu::select_kernels(isa);
    for (DType t : test::kAllTypes) {
      const int64_t rows = 40, cols = 96, nr = 12;
      auto w = test::random_weights(t, rows, cols, 3);
      const auto ldw = static_cast<size_t>(row_bytes(t, cols));
      const auto idx = random_idx(rows, nr, 4);
      for (int64_t nt : {1, 3}) {
        const auto a = sparse_coefficients(nt, nr, 5);
        auto poisoned = w;
        for (int64_t j = 1; j < nr; j += 4) {
          uint8_t* row = poisoned.data() + idx[j] * ldw;
          if (dtype_block_size(t) == 1) {
            std::vector<float> nan(static_cast<size_t>(cols), std::nanf(""));
            quantize_row(t, nan.data(), row, cols);
          } else {
            // Every block's f16 scale becomes NaN.
            const auto bb = static_cast<size_t>(dtype_block_bytes(t));
            for (size_t b = 0; b < ldw; b += bb) std::memcpy(row + b, "\x00\x7e", 2);
          }
        }
        std::vector<float> y(static_cast<size_t>(nt * cols), 1.0f), yp = y;
        const cpu::WeightKernels& k = ks.weights(t);
        k.axpy(cols, w.data(), ldw, idx.data(), nr, a.data(), nr, nt, y.data(), cols);
        k.axpy(cols, poisoned.data(), ldw, idx.data(), nr, a.data(), nr, nt, yp.data(), cols);
        ASSERT_EQ(std::memcmp(y.data(), yp.data(), y.size() * 4), 0)
            << cpu::isa_name(isa) << " " << dtype_name(t) << " nt=" << nt;
        // All coefficients zero: nothing is read and y is untouched.
        const std::vector<float> zeros(static_cast<size_t>(nt * nr), 0.0f);
        k.axpy(cols, nullptr, ldw, idx.data(), nr, zeros.data(), nr, nt, yp.data(), cols);
        ASSERT_EQ(std::memcmp(y.data(), yp.data(), y.size() * 4), 0);
      }
    }
  }
}

TEST(SparseOps, GatherMatmulOfEveryRowEqualsMatmul) {
  for (cpu::Isa isa : isas()) {
    cpu::CpuContext ctx(2, isa);
    for (DType t : test::kAllTypes) {
      for (int64_t cols : test::test_cols(t)) {
        const int64_t rows = 67;
        const auto w = test::random_weights(t, rows, cols, static_cast<uint32_t>(cols));
        std::vector<int32_t> idx(static_cast<size_t>(rows));
        std::iota(idx.begin(), idx.end(), 0);
        for (int64_t n : {1, 5, 13}) {
          const auto x = test::random_floats(n * cols, static_cast<uint32_t>(n + cols));
          std::vector<float> dense(static_cast<size_t>(rows * n)), y(dense.size());
          matmul(ctx, t, w.data(), rows, cols, x.data(), n, dense.data());
          gather_matmul(ctx, t, w.data(), rows, cols, idx.data(), rows, x.data(), n, y.data());
          ASSERT_EQ(std::memcmp(y.data(), dense.data(), y.size() * 4), 0)
              << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols << " n=" << n;
        }
      }
    }
  }
}

TEST(SparseOps, GatherMatmulDoesNotDependOnThreadCount) {
  for (cpu::Isa isa : isas()) {
    for (DType t : test::kAllTypes) {
      // Enough selected bytes that every thread gets a part.
      const int64_t rows = 1000, cols = 1024, n_idx = 401;
      const auto w = test::random_weights(t, rows, cols, 11);
      const auto idx = random_idx(rows, n_idx, 12);
      for (int64_t n : {1, 9}) {
        const auto x = test::random_floats(n * cols, 13);
        std::vector<float> dense(static_cast<size_t>(rows * n)), first;
        for (int nth = 1; nth <= 4; ++nth) {
          cpu::CpuContext ctx(nth, isa);
          std::vector<float> y(static_cast<size_t>(n_idx * n));
          gather_matmul(ctx, t, w.data(), rows, cols, idx.data(), n_idx, x.data(), n, y.data());
          if (nth == 1) {
            first = y;
            matmul(ctx, t, w.data(), rows, cols, x.data(), n, dense.data());
            for (int64_t tok = 0; tok < n; ++tok) {
              for (int64_t j = 0; j < n_idx; ++j) {
                ASSERT_TRUE(same_bits(y[tok * n_idx + j], dense[tok * rows + idx[j]]));
              }
            }
          }
          ASSERT_EQ(std::memcmp(y.data(), first.data(), y.size() * 4), 0)
              << cpu::isa_name(isa) << " " << dtype_name(t) << " n=" << n << " nth=" << nth;
        }
      }
    }
  }
}

// The fused up/gate gather equals two separate gathers bit for bit, for any thread count (the
// split of its 2 * n_idx outputs may cut across the two matrices anywhere).
TEST(SparseOps, GatherMatmul2EqualsTwoGathers) {
  for (cpu::Isa isa : isas()) {
    for (DType t : test::kAllTypes) {
      const int64_t rows = 300, cols = 256, n_idx = 77;
      const auto w1 = test::random_weights(t, rows, cols, 31);
      const auto w2 = test::random_weights(t, rows, cols, 32);
      const auto idx = random_idx(rows, n_idx, 33);
      for (int64_t n : {1, 3}) {
        const auto x = test::random_floats(n * cols, 34);
        const auto size = static_cast<size_t>(n_idx * n);
        std::vector<float> a1(size), a2(size), b1(size), b2(size);
        cpu::CpuContext one(1, isa);
        gather_matmul(one, t, w1.data(), rows, cols, idx.data(), n_idx, x.data(), n, a1.data());
        gather_matmul(one, t, w2.data(), rows, cols, idx.data(), n_idx, x.data(), n, a2.data());
        for (int nth = 1; nth <= 3; ++nth) {
          cpu::CpuContext ctx(nth, isa);
          gather_matmul2(ctx, t, w1.data(), w2.data(), rows, cols, idx.data(), n_idx, x.data(), n,
                         b1.data(), b2.data());
          EXPECT_EQ(std::memcmp(a1.data(), b1.data(), size * 4), 0)
              << cpu::isa_name(isa) << " " << dtype_name(t) << " n=" << n << " nth=" << nth;
          EXPECT_EQ(std::memcmp(a2.data(), b2.data(), size * 4), 0)
              << cpu::isa_name(isa) << " " << dtype_name(t) << " n=" << n << " nth=" << nth;
        }
      }
    }
  }
}

// Coefficients where one in twenty is zero: long lists that still get many chunks.
std::vector<float> dense_coefficients(int64_t nr, uint32_t seed) {
  auto a = test::random_floats(nr, seed);
  for (int64_t j = 7; j < nr; j += 20) a[j] = 0.0f;
  return a;
}

// Several tokens go through the column split, one token over a long list through chunked
// partial sums (about 125, 660 and 1620 non-zero coefficients: no chunks, 8 and 24 chunks of
// unequal group counts); both must not depend on the thread count, 5 threads included (an
// uneven share of the chunks). The long lists' reference check samples the columns.
TEST(SparseOps, SparseAxpyDoesNotDependOnThreadCount) {
  struct Case {
    int64_t n_idx, n;
  };
  for (DType t : test::kAllTypes) {
    // Odd widths for float types leave a partial last column block.
    for (int64_t cols : {int64_t{1024}, dtype_block_size(t) == 1 ? int64_t{1001} : 96}) {
      for (const Case& k : {Case{251, 1}, Case{251, 4}, Case{700, 1}, Case{1700, 1}}) {
        const int64_t n_idx = k.n_idx, n = k.n;
        const bool long_list = n_idx > 251;
        if (long_list && cols != 1024) continue;
        const int64_t rows = n_idx + 99;
        const auto w_t = test::random_weights(t, rows, cols, 21);
        const auto wf = dequantized(t, w_t, rows, cols);
        const auto idx = random_idx(rows, n_idx, 22);
        const auto a =
            long_list ? dense_coefficients(n_idx, 23) : sparse_coefficients(n, n_idx, 23);
        const int64_t col_step = long_list ? 13 : 1;
        for (cpu::Isa isa : isas()) {
          std::vector<float> first;
          for (int nth = 1; nth <= 5; ++nth) {
            cpu::CpuContext ctx(nth, isa);
            std::vector<float> y(static_cast<size_t>(n * cols), std::nanf(""));
            sparse_axpy(ctx, t, w_t.data(), rows, cols, idx.data(), n_idx, a.data(), n, y.data());
            if (nth > 1) {
              ASSERT_EQ(std::memcmp(y.data(), first.data(), y.size() * 4), 0)
                  << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                  << " n_idx=" << n_idx << " n=" << n << " nth=" << nth;
              continue;
            }
            first = y;
            for (int64_t tok = 0; tok < n; ++tok) {
              for (int64_t c = 0; c < cols; c += col_step) {
                double want = 0, abs = 0;
                for (int64_t j = 0; j < n_idx; ++j) {
                  const double p = static_cast<double>(a[tok * n_idx + j]) * wf[idx[j] * cols + c];
                  want += p;
                  abs += std::fabs(p);
                }
                const double quant =
                    coef_quant_bound(t, w_t.data(), static_cast<size_t>(row_bytes(t, cols)),
                                     idx.data(), n_idx, a.data() + tok * n_idx, n, c);
                ASSERT_NEAR(y[tok * cols + c], want,
                            (n_idx + 2) * FLT_EPSILON * abs + 1e-30 + quant)
                    << cpu::isa_name(isa) << " " << dtype_name(t) << " c=" << c;
              }
            }
          }
        }
      }
    }
  }
}

// One token over a long list shaped like a hot-first model's (a run of consecutive rows, then
// scattered ones): the threads take chunk ranges of equal estimated cost, which then differ in
// length, and the sum must still be the same bits for every thread count. Q4_0 and the K-quants
// take the integer kernels, F16 the float one.
TEST(SparseOps, SparseAxpyOverAHotHeadDoesNotDependOnThreadCount) {
  for (DType t : {DType::F16, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t cols = 512, n_idx = 900, rows = 2 * n_idx + 1;
    const auto w_t = test::random_weights(t, rows, cols, 51);
    const auto idx = run_then_gaps_idx(n_idx);
    const auto a = dense_coefficients(n_idx, 52);
    for (cpu::Isa isa : isas()) {
      std::vector<float> first;
      for (int nth = 1; nth <= 4; ++nth) {
        cpu::CpuContext ctx(nth, isa);
        std::vector<float> y(static_cast<size_t>(cols), std::nanf(""));
        sparse_axpy(ctx, t, w_t.data(), rows, cols, idx.data(), n_idx, a.data(), 1, y.data());
        if (first.empty()) {
          first = y;
          continue;
        }
        ASSERT_EQ(std::memcmp(y.data(), first.data(), y.size() * 4), 0)
            << cpu::isa_name(isa) << " " << dtype_name(t) << " nth=" << nth;
      }
    }
  }
}

// Several tokens with lists of their own: each row is sparse_axpy of that token's list alone, bit
// for bit, for short lists (one pass) and long ones (chunked partial sums), at any thread count.
// Lists of every kind: a mixed block (some tokens read most rows, some few, one none), a block
// of heavily overlapping lists (float rows then go through one product over their union), and
// short disjoint ones (token by token). Whichever way, each token gets its own bits.
TEST(SparseOps, SparseAxpyEachIsOneSparseAxpyPerToken) {
  const std::vector<std::vector<int64_t>> blocks = {
      {700, 40, 1700, 130, 0, 999},  // per token; 0: an empty list
      {1500, 1300, 1700, 1100, 1750, 1200, 1600, 1400, 1650, 1250, 1550, 1350, 1450, 1800},
      {50, 70, 64, 3}};
  const int64_t ld = 1800, rows = 1900;
  for (const std::vector<int64_t>& lengths : blocks)
    for (DType t : test::kAllTypes) {
      const auto n = static_cast<int64_t>(lengths.size());
      // 203 and 600 columns for float rows: a tail, and more than one of the union product's
      // column panels.
      std::vector<int64_t> all_cols = {256, 96};
      if (dtype_block_size(t) == 1) all_cols = {256, 203, 600};
      for (int64_t cols : all_cols) {
        const auto w_t = test::random_weights(t, rows, cols, 31);
        std::vector<int32_t> idx(static_cast<size_t>(n * ld));
        std::vector<float> a(static_cast<size_t>(n * ld));
        std::vector<int64_t> counts(lengths.begin(), lengths.end());
        for (int64_t tok = 0; tok < n; ++tok) {
          const auto list = random_idx(rows, counts[tok], 32 + static_cast<uint32_t>(tok));
          const auto coef = sparse_coefficients(1, counts[tok], 40 + static_cast<uint32_t>(tok));
          std::copy(list.begin(), list.end(), idx.begin() + tok * ld);
          std::copy(coef.begin(), coef.end(), a.begin() + tok * ld);
        }
        for (cpu::Isa isa : isas()) {
          for (int nth = 1; nth <= 3; ++nth) {
            cpu::CpuContext ctx(nth, isa);
            std::vector<float> want(static_cast<size_t>(n * cols), std::nanf(""));
            for (int64_t tok = 0; tok < n; ++tok) {
              sparse_axpy(ctx, t, w_t.data(), rows, cols, idx.data() + tok * ld, counts[tok],
                          a.data() + tok * ld, 1, want.data() + tok * cols);
            }
            for (const int64_t nt : {int64_t{1}, int64_t{2}, n - 1, n}) {
              std::vector<float> y(static_cast<size_t>(nt * cols), std::nanf(""));
              sparse_axpy_each(ctx, t, w_t.data(), rows, cols, idx.data(), a.data(), ld,
                               counts.data(), nt, y.data());
              EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0)
                  << cpu::isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                  << " tokens=" << nt << " nth=" << nth;
            }
          }
        }
      }
    }
}

// The sparse down projection with every neuron active is the dense one: sparse_axpy over the
// neuron-major W_t against matvec over W = W_t^T (for quantized types, over the dequantized W_t
// as F32, since a transposed quantized matrix has other blocks).
TEST(SparseOps, AllActiveSparseAxpyEqualsMatvec) {
  for (cpu::Isa isa : isas()) {
    cpu::CpuContext ctx(3, isa);
    for (DType t : test::kAllTypes) {
      const int64_t n_embd = 160, n_ff = 291;
      const auto w_t = test::random_weights(t, n_ff, n_embd, 31);
      const auto wf_t = dequantized(t, w_t, n_ff, n_embd);
      std::vector<float> wf(wf_t.size());
      for (int64_t r = 0; r < n_ff; ++r) {
        for (int64_t c = 0; c < n_embd; ++c) wf[c * n_ff + r] = wf_t[r * n_embd + c];
      }
      // Float types round element by element, so W in t holds exactly W_t's values.
      const DType wtype = dtype_block_size(t) == 1 ? t : DType::F32;
      std::vector<uint8_t> w(static_cast<size_t>(n_embd * row_bytes(wtype, n_ff)));
      quantize_rows(wtype, wf.data(), w.data(), n_embd, n_ff);
      std::vector<int32_t> idx(static_cast<size_t>(n_ff));
      std::iota(idx.begin(), idx.end(), 0);
      const auto a = test::random_floats(n_ff, 32);
      std::vector<float> dense(static_cast<size_t>(n_embd)), y(dense.size());
      matvec(ctx, wtype, w.data(), n_embd, n_ff, a.data(), dense.data());
      sparse_axpy(ctx, t, w_t.data(), n_ff, n_embd, idx.data(), n_ff, a.data(), 1, y.data());
      for (int64_t c = 0; c < n_embd; ++c) {
        double abs = 0;
        for (int64_t r = 0; r < n_ff; ++r)
          abs += std::fabs(static_cast<double>(a[r]) * wf_t[r * n_embd + c]);
        const auto ldw = static_cast<size_t>(row_bytes(t, n_embd));
        const double tol = (n_ff + 2 + 2 * (n_ff / 8.0 + 8)) * FLT_EPSILON * abs +
                           coef_quant_bound(t, w_t.data(), ldw, idx.data(), n_ff, a.data(), 1, c);
        ASSERT_NEAR(y[c], dense[c], tol)
            << cpu::isa_name(isa) << " " << dtype_name(t) << " c=" << c;
      }
    }
  }
}

TEST(SparseOps, EmptyListsAndBadInput) {
  cpu::CpuContext ctx(2, cpu::Isa::Scalar);
  const auto w = test::random_weights(DType::Q4_0, 4, 64, 1);
  const float x[128] = {};
  float y[128];
  std::fill(std::begin(y), std::end(y), 7.0f);
  const int32_t good[2] = {0, 3}, low[2] = {0, -1}, high[2] = {2, 4};
  // No active neuron: gather writes nothing, axpy writes zeros.
  gather_matmul(ctx, DType::Q4_0, w.data(), 4, 64, good, 0, x, 1, y);
  EXPECT_EQ(y[0], 7.0f);
  sparse_axpy(ctx, DType::Q4_0, w.data(), 4, 64, good, 0, x, 2, y);
  EXPECT_TRUE(std::all_of(y, y + 128, [](float v) { return v == 0.0f; }));
  EXPECT_THROW(gather_matmul(ctx, DType::Q4_0, w.data(), 4, 64, low, 2, x, 1, y), Error);
  EXPECT_THROW(gather_matmul(ctx, DType::Q4_0, w.data(), 4, 64, high, 2, x, 1, y), Error);
  EXPECT_THROW(sparse_axpy(ctx, DType::Q4_0, w.data(), 4, 64, high, 2, x, 1, y), Error);
  EXPECT_THROW(sparse_axpy(ctx, DType::Q4_0, w.data(), 4, 48, good, 2, x, 1, y), Error);
  EXPECT_THROW(gather_matmul(ctx, DType::Q8_0, w.data(), 4, 40, good, 2, x, 1, y), Error);
  EXPECT_THROW(gather_matmul(ctx, DType::F16, w.data(), 4, 32, good, -1, x, 1, y), Error);
  EXPECT_THROW(sparse_axpy(ctx, DType::F16, w.data(), 4, 32, good, 2, x, -1, y), Error);
}

}  // namespace
}  // namespace hearth
