// lane_matvec against the dense product it must reproduce: for float W and an input that is
// zero outside a list, the product read from W's input-major copy is the bits of matvec and of
// matmul over W, on every ISA this CPU has, for any thread count (powers of two take lanes by
// residue, others runs of lanes), on odd sizes (tails of every lane width) and lists from empty
// to full, with the copy's rows in input order or lane-grouped.
#include <cstring>
#include <random>

#include "backend/cpu/context.h"
#include "common/kernel_test_util.h"
#include "core/error.h"
#include "core/quantize.h"
#include "ops/matmul.h"
#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

// W_t [in, out] in type tt: W [out, in] (type t) transposed, from W's exact float values, its
// rows in input order or lane-grouped.
std::vector<uint8_t> input_major(DType t, const std::vector<uint8_t>& w, int64_t out, int64_t in,
                                 DType tt, bool grouped) {
  std::vector<float> f(static_cast<size_t>(out * in)), ft(f.size());
  dequantize_row(t, w.data(), f.data(), out * in);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      ft[(grouped ? lane_grouped_row(i, in) : i) * out + o] = f[o * in + i];
    }
  }
  std::vector<uint8_t> wt(static_cast<size_t>(in * row_bytes(tt, out)));
  quantize_row(tt, ft.data(), wt.data(), in * out);
  return wt;
}

TEST(LaneMatvec, IsTheDenseProductBitForBit) {
  const std::pair<DType, DType> pairs[] = {
      {DType::F32, DType::F32}, {DType::F16, DType::F16}, {DType::BF16, DType::F32}};
  for (const auto& [t, tt] : pairs) {
    for (int64_t in : {1, 15, 37, 300}) {
      for (int64_t out : {1, 17, 203}) {
        const auto w = test::random_weights(t, out, in, static_cast<uint32_t>(in + out));
        for (const bool grouped : {false, true}) {
          const auto wt = input_major(t, w, out, in, tt, grouped);
          for (int density : {0, 10, 60, 100}) {
            std::mt19937 rng(static_cast<uint32_t>(density + in));
            const auto dense = test::random_floats(2 * in, static_cast<uint32_t>(out));
            std::vector<float> x(dense.size(), 0.0f);
            for (size_t i = 0; i < x.size(); ++i) {
              if (static_cast<int>(rng() % 100) < density) x[i] = dense[i];
            }
            for (cpu::Isa isa : test::isas()) {
              for (int nth : {1, 2, 3, 4, 8}) {
                // Eight threads (one lane each where the table keeps 8) on one case: more threads
                // than this machine's cores make every case slow.
                if (nth == 8 && (in != 300 || density != 60)) continue;
                cpu::CpuContext ctx(nth, isa);
                std::vector<float> want(static_cast<size_t>(2 * out));
                matmul(ctx, t, w.data(), out, in, x.data(), 2, want.data());
                for (int64_t tok = 0; tok < 2; ++tok) {
                  std::vector<int32_t> idx;
                  std::vector<float> a;
                  for (int64_t i = 0; i < in; ++i) {
                    if (x[tok * in + i] == 0.0f) continue;
                    idx.push_back(static_cast<int32_t>(i));
                    a.push_back(x[tok * in + i]);
                  }
                  std::vector<float> y(static_cast<size_t>(out), std::nanf(""));
                  lane_matvec(ctx, t, tt, wt.data(), in, out, idx.data(),
                              static_cast<int64_t>(idx.size()), a.data(), y.data(), grouped);
                  std::vector<float> one(static_cast<size_t>(out));
                  matvec(ctx, t, w.data(), out, in, x.data() + tok * in, one.data());
                  ASSERT_EQ(std::memcmp(y.data(), one.data(), y.size() * 4), 0)
                      << cpu::isa_name(isa) << " " << dtype_name(t) << " in=" << in
                      << " out=" << out << " density=" << density << " nth=" << nth
                      << " grouped=" << grouped;
                  ASSERT_EQ(std::memcmp(y.data(), want.data() + tok * out, y.size() * 4), 0)
                      << "matmul " << cpu::isa_name(isa) << " " << dtype_name(t) << " in=" << in
                      << " out=" << out << " density=" << density;
                }
              }
            }
          }
        }
      }
    }
  }
}

// lane_matmul: every token of a batch through the copy, the bits of matmul over W (zeroed inputs
// included), for batches around the tile sizes (12 tokens a register tile, 96 a scratch tile) and
// outputs around the 64-column chunks.
TEST(LaneMatvec, BatchesGiveTheDenseProductBitForBit) {
  const std::pair<DType, DType> pairs[] = {
      {DType::F32, DType::F32}, {DType::F16, DType::F16}, {DType::BF16, DType::F32}};
  for (const auto& [t, tt] : pairs) {
    for (int64_t in : {1, 37, 300}) {
      for (int64_t out : {17, 203}) {
        const auto w = test::random_weights(t, out, in, static_cast<uint32_t>(in * out));
        for (const bool grouped : {false, true}) {
          const auto wt = input_major(t, w, out, in, tt, grouped);
          for (int64_t n : {1, 13, 97}) {
            std::mt19937 rng(static_cast<uint32_t>(n + in));
            auto x = test::random_floats(n * in, static_cast<uint32_t>(out + n));
            for (float& v : x) {
              if (rng() % 3 == 0) v = 0.0f;
            }
            for (cpu::Isa isa : test::isas()) {
              for (int nth : {1, 3}) {
                cpu::CpuContext ctx(nth, isa);
                std::vector<float> want(static_cast<size_t>(n * out));
                matmul(ctx, t, w.data(), out, in, x.data(), n, want.data());
                std::vector<float> y(want.size(), std::nanf(""));
                lane_matmul(ctx, t, tt, wt.data(), in, out, x.data(), n, y.data(), grouped);
                ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0)
                    << cpu::isa_name(isa) << " " << dtype_name(t) << " in=" << in
                    << " out=" << out << " n=" << n << " nth=" << nth << " grouped=" << grouped;
              }
            }
          }
        }
      }
    }
  }
}

TEST(LaneMatvec, RefusesWhatItCannotReproduce) {
  cpu::CpuContext ctx(1);
  const std::vector<uint8_t> w(64 * 32);
  const int32_t unsorted[] = {3, 1};
  const float a[] = {1.0f, 2.0f};
  float y[32];
  EXPECT_THROW(lane_matvec(ctx, DType::F32, DType::F32, w.data(), 4, 8, unsorted, 2, a, y, false),
               Error);
  const int32_t sorted[] = {1, 3};
  EXPECT_THROW(lane_matvec(ctx, DType::Q8_0, DType::Q8_0, w.data(), 4, 32, sorted, 2, a, y, false),
               Error);
  const int32_t outside[] = {1, 4};
  EXPECT_THROW(lane_matvec(ctx, DType::F32, DType::F32, w.data(), 4, 8, outside, 2, a, y, false),
               Error);
}

}  // namespace
}  // namespace hearth
