// Q4_0 with a per-block scale search (hearth quantize's default): valid blocks that never have a
// larger squared error than ggml's reference rounding, on random, outlier-heavy and degenerate
// blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/quantize.h"

namespace hearth {
namespace {

double block_error(const float* x, const BlockQ4_0& b) {
  float y[32];
  dequantize_row(DType::Q4_0, &b, y, 32);
  double e = 0;
  for (int j = 0; j < 32; ++j) e += (x[j] - y[j]) * (x[j] - y[j]);
  return e;
}

TEST(QuantizeSearch, NeverWorseThanTheReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double ref_total = 0, search_total = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    float x[32];
    for (float& v : x) v = normal(rng) * (trial % 7 + 1) * 0.01f;
    if (trial % 3 == 0) x[trial % 32] *= 6.0f;  // one outlier
    BlockQ4_0 ref, got;
    quantize_block_q4_0(x, &ref);
    quantize_block_q4_0_search(x, &got);
    const double er = block_error(x, ref), eg = block_error(x, got);
    EXPECT_LE(eg, er * (1 + 1e-6) + 1e-12) << "trial " << trial;
    ref_total += er;
    search_total += eg;
  }
  // Across blocks the search is better, not just never worse.
  EXPECT_LT(search_total, 0.99 * ref_total);
}

TEST(QuantizeSearch, DegenerateBlocks) {
  float zeros[32] = {};
  BlockQ4_0 b;
  quantize_block_q4_0_search(zeros, &b);
  EXPECT_EQ(block_error(zeros, b), 0.0);
  float one[32] = {};
  one[17] = -3.5f;
  quantize_block_q4_0_search(one, &b);
  EXPECT_LT(block_error(one, b), 1e-6);
  float same[32];
  for (float& v : same) v = 0.25f;
  quantize_block_q4_0_search(same, &b);
  EXPECT_LT(block_error(same, b), 1e-6);
}

TEST(QuantizeSearch, RowsOfOtherTypesAreUnchanged) {
  float x[64];
  for (int j = 0; j < 64; ++j) x[j] = std::sin(0.3f * j);
  uint8_t a[128], b[128];
  quantize_row(DType::Q8_0, x, a, 64);
  quantize_row_search(DType::Q8_0, x, b, 64);
  EXPECT_EQ(0, std::memcmp(a, b, row_bytes(DType::Q8_0, 64)));
}

}  // namespace
}  // namespace hearth
