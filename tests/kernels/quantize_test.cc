// Quantization must produce ggml's bytes exactly (files written here load bit-exact in
// llama.cpp) and dequantize within the format's error bound.
#include "core/quantize.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "common/kernel_test_util.h"

namespace hearth {
namespace {

TEST(Quantize, Q8_0KnownBlock) {
  // amax = 127 gives d = 1 exactly, so every quant is round(x) with ties away from zero
  // (roundf), which differs from round-to-even at 2.5 and -2.5.
  float x[32] = {127.0f, -127.0f, 2.5f, -2.5f,  0.5f,    -0.5f, 1.49f, -1.51f,
                 0.0f,   -0.0f,   3.5f, 100.4f, -100.6f, 64.5f, 7.0f,  -7.0f};
  for (int j = 16; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // 1.0
  const int8_t expect[32] = {127, -127, 3, -3, 1, -1, 1, -2, 0, 0, 4, 100, -101, 65, 7, -7,
                             0,   0,    1, 1,  1, 1,  2, 2,  2, 2, 3, 3,   3,    3,  4, 4};
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], expect[j]) << "element " << j;
}

TEST(Quantize, Q8_0ScaleIsRoundedToHalf) {
  // x = j - 16: amax 16, d = 16/127 stored as f16 0x3008; quants use the unrounded 127/16.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3008);
  EXPECT_EQ(b.qs[0], -127);  // -16 * 7.9375
  EXPECT_EQ(b.qs[1], -119);  // -15 * 7.9375 = -119.06
  EXPECT_EQ(b.qs[8], -64);   // -8 * 7.9375 = -63.5 (ties away from zero)
  EXPECT_EQ(b.qs[15], -8);   // -1 * 7.9375
  EXPECT_EQ(b.qs[16], 0);
  EXPECT_EQ(b.qs[24], 64);  // 8 * 7.9375 = 63.5
  EXPECT_EQ(b.qs[31], 119);
}

TEST(Quantize, Q8_0ZeroBlock) {
  float x[32] = {};
  BlockQ8_0 b;
  std::memset(&b, 0xff, sizeof b);
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(Quantize, Q4_0KnownBlockNegativeMax) {
  // The largest magnitude is -8, so d = -8 / -8 = 1 and q = min(15, trunc(x + 8.5)).
  float x[32] = {-8.0f, 7.0f, 7.4f, -7.6f, 0.0f, 0.5f, -0.5f, 1.49f, -3.0f, 3.0f, 2.5f, -2.5f};
  for (int j = 16; j < 32; ++j) x[j] = static_cast<float>(j - 24);  // -8 .. 7
  BlockQ4_0 b;
  quantize_row(DType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  const int lo[16] = {0, 15, 15, 0, 8, 9, 8, 9, 5, 11, 11, 6, 8, 8, 8, 8};
  for (int j = 0; j < 16; ++j) {
    const int hi = j;  // x[16 + j] = j - 8 -> q = j
    EXPECT_EQ(b.qs[j], lo[j] | hi << 4) << "byte " << j;
  }
}

TEST(Quantize, Q4_0PositiveMaxFlipsScaleAndClamps) {
  // max = +8 (the first of +8 and -8): d = -1, so +8 -> q 0 and -8 -> 16.5, clamped to 15.
  float x[32] = {8.0f, -8.0f, -7.0f, 1.0f};
  BlockQ4_0 b;
  quantize_row(DType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0xbc00);         // -1.0
  EXPECT_EQ(b.qs[0], 0x80);       // x[0] -> 0, x[16] = 0 -> 8
  EXPECT_EQ(b.qs[1], 0x80 | 15);  // -8 -> clamped 15
  EXPECT_EQ(b.qs[2], 0x80 | 15);  // -7 -> 15.5 -> 15
  EXPECT_EQ(b.qs[3], 0x80 | 7);   // 1 -> 7.5 -> 7
  float back[32];
  dequantize_row(DType::Q4_0, &b, back, 32);
  EXPECT_EQ(back[0], 8.0f);
  EXPECT_EQ(back[1], -7.0f);
  EXPECT_EQ(back[3], 1.0f);
  EXPECT_EQ(back[16], 0.0f);
}

TEST(Quantize, FloatTypesKnownBits) {
  const float x[4] = {1.0f, -2.0f, 65504.0f, 1.0f / 3.0f};
  uint16_t h[4], b[4];
  quantize_row(DType::F16, x, h, 4);
  quantize_row(DType::BF16, x, b, 4);
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0xc000);
  EXPECT_EQ(h[2], 0x7bff);
  EXPECT_EQ(h[3], 0x3555);
  EXPECT_EQ(b[0], 0x3f80);
  EXPECT_EQ(b[1], 0xc000);
  EXPECT_EQ(b[3], 0x3eab);  // 0x3eaaaaab rounds up
}

TEST(Quantize, RoundTripErrorBounds) {
  for (int64_t n : {32, 96, 1024}) {
    const auto x = test::random_floats(n, static_cast<uint32_t>(n), 3.0f);
    for (DType t : test::kAllTypes) {
      std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, n)));
      std::vector<float> back(static_cast<size_t>(n));
      quantize_row(t, x.data(), q.data(), n);
      dequantize_row(t, q.data(), back.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
        for (int j = 0; j < 32; ++j) {
          const int64_t i = b * 32 + j;
          const float err = std::fabs(x[i] - back[i]);
          float bound = 0.0f;
          switch (t) {
            case DType::F32:
              bound = 0.0f;
              break;
            case DType::F16:
              bound = std::fabs(x[i]) * 0x1p-11f + 0x1p-25f;
              break;
            case DType::BF16:
              bound = std::fabs(x[i]) * 0x1p-8f;
              break;
            // Half a step, plus the f16 rounding of the scale applied to up to 127 steps.
            case DType::Q8_0:
              bound = amax / 127.0f * (0.5f + 127.0f * 0x1p-11f) * 1.001f;
              break;
            // A full step at the clamped end of the range.
            case DType::Q4_0:
              bound = amax / 8.0f * (1.0f + 8.0f * 0x1p-11f) * 1.001f;
              break;
            default:  // the block types have their own test (quantize_blocks_test.cc)
              FAIL() << dtype_name(t) << " is not one of this test's types";
          }
          ASSERT_LE(err, bound) << dtype_name(t) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(Quantize, RowsApiMatchesRowByRow) {
  const int64_t rows = 3, cols = 64;
  const auto x = test::random_floats(rows * cols, 5);
  for (DType t : test::kAllTypes) {
    const int64_t rb = row_bytes(t, cols);
    std::vector<uint8_t> all(static_cast<size_t>(rows * rb)), one(static_cast<size_t>(rb));
    quantize_rows(t, x.data(), all.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(t, x.data() + r * cols, one.data(), cols);
      EXPECT_EQ(std::memcmp(one.data(), all.data() + r * rb, static_cast<size_t>(rb)), 0);
    }
  }
}

TEST(Quantize, RejectsPartialBlocks) {
  float x[40] = {};
  uint8_t y[64];
  EXPECT_THROW(quantize_row(DType::Q4_0, x, y, 40), Error);
  EXPECT_THROW(dequantize_row(DType::Q8_0, y, x, 33), Error);
}

}  // namespace
}  // namespace hearth
