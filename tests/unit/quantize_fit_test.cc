// The IQ4 code search of the quantizers (qfit::iq4_index): the nearest code-book value, a tie
// going to the larger code, over every integer, every midpoint between neighbouring values and
// a step either side of it, out-of-range values and NaN.
#include "core/quantize_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/quant_blocks.h"

namespace hearth {
namespace {

// The nearest value by brute force; on a tie the larger code.
int nearest_code(float v) {
  int best = 0;
  for (int c = 1; c < 16; ++c) {
    if (std::fabs(v - kIq4nlValues[c]) <= std::fabs(v - kIq4nlValues[best])) best = c;
  }
  return best;
}

TEST(QuantizeFit, Iq4IndexIsTheNearestCode) {
  std::vector<float> values;
  for (int k = -140; k <= 130; ++k) {
    values.push_back(static_cast<float>(k));
    values.push_back(static_cast<float>(k) + 0.25f);
  }
  for (int c = 0; c + 1 < 16; ++c) {
    const float mid = 0.5f * static_cast<float>(kIq4nlValues[c] + kIq4nlValues[c + 1]);
    for (float v = mid, i = 0; i < 3; ++i, v = std::nextafter(v, -1000.0f)) values.push_back(v);
    for (float v = mid, i = 0; i < 3; ++i, v = std::nextafter(v, 1000.0f)) values.push_back(v);
  }
  for (float v : values) EXPECT_EQ(qfit::iq4_index(v), nearest_code(v)) << "v = " << v;
  EXPECT_EQ(qfit::iq4_index(-std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(qfit::iq4_index(std::numeric_limits<float>::infinity()), 15);
  EXPECT_EQ(qfit::iq4_index(std::numeric_limits<float>::quiet_NaN()), 15);
}

// nearest_int is lrintf (round half to even) wherever that fits in +-2^22, saturates beyond, and
// maps nan to 0.
TEST(QuantizeFit, NearestIntRoundsHalfToEven) {
  std::vector<float> values = {0.0f,       -0.0f,      0.5f,        1.5f,        2.5f,
                               -0.5f,      -1.5f,      -2.5f,       0.49999997f, -0.49999997f,
                               4194303.0f, 4194303.5f, -4194303.5f, 1e-30f};
  for (int k = -3000; k <= 3000; ++k) {
    for (const float f : {0.0f, 0.25f, 0.5f, 0.75f}) values.push_back(static_cast<float>(k) + f);
  }
  for (float v = 1.0f; v < 4194304.0f; v *= 1.37f) values.push_back(v), values.push_back(-v);
  for (const float v : values) {
    EXPECT_EQ(qfit::nearest_int(v), static_cast<int>(std::lrintf(v))) << "v = " << v;
  }
  EXPECT_EQ(qfit::nearest_int(5e6f), 4194304);
  EXPECT_EQ(qfit::nearest_int(-std::numeric_limits<float>::infinity()), -4194304);
  EXPECT_EQ(qfit::nearest_int(std::numeric_limits<float>::quiet_NaN()), 0);
}

}  // namespace
}  // namespace hearth
