// Bit-exact dequantization of the types of core/quant_blocks.h: blocks with known (random) bytes,
// decoded here by ggml's reference dequantization loops written out independently of
// quant_blocks.h's accessors (ggml's loop order and shift/mask walks, its kmask unpacking of the
// Q3_K scales), must come out of dequantize_row with exactly the same floats.
#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "common/kernel_test_util.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quantize.h"

namespace hearth {
namespace {

// ggml's IQ4 table, written out again rather than taken from quant_blocks.h.
constexpr int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// A block of random bytes with its f16 fields set to ordinary values (random bytes there could
// be inf or nan, which compare unequal to themselves).
template <typename Block>
Block random_block(uint32_t seed) {
  std::mt19937 rng(seed);
  Block b;
  auto* p = reinterpret_cast<uint8_t*>(&b);
  for (size_t i = 0; i < sizeof b; ++i) p[i] = static_cast<uint8_t>(rng());
  return b;
}
uint16_t half_of(float v) { return fp32_to_fp16(v); }

template <typename Block>
void expect_decodes_to(DType t, const Block& b, const std::vector<float>& want) {
  std::vector<float> got(want.size());
  dequantize_row(t, &b, got.data(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << dtype_name(t) << " weight " << i;
  }
}

// The 5-bit codes of a Q5_0 / Q5_1 block as ggml's dequantizer forms them from qh read as a
// 32-bit word.
std::array<int, 32> q5_codes(const uint8_t* qs, const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  std::array<int, 32> c{};
  for (int j = 0; j < 16; ++j) {
    c[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10);
    c[j + 16] = (qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
  }
  return c;
}

TEST(DequantizeBlocks, Q4_1AndQ5_1AndQ5_0) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto b41 = random_block<BlockQ4_1>(seed);
    b41.d = half_of(0.0371f);
    b41.m = half_of(-0.29f);
    std::vector<float> want(32);
    const float d = fp16_to_fp32(b41.d), m = fp16_to_fp32(b41.m);
    for (int j = 0; j < 16; ++j) {
      want[j] = static_cast<float>(b41.qs[j] & 0x0F) * d + m;
      want[j + 16] = static_cast<float>(b41.qs[j] >> 4) * d + m;
    }
    expect_decodes_to(DType::Q4_1, b41, want);

    auto b50 = random_block<BlockQ5_0>(seed + 10);
    b50.d = half_of(-0.0123f);
    const std::array<int, 32> c50 = q5_codes(b50.qs, b50.qh);
    for (int j = 0; j < 32; ++j) want[j] = static_cast<float>(c50[j] - 16) * fp16_to_fp32(b50.d);
    expect_decodes_to(DType::Q5_0, b50, want);

    auto b51 = random_block<BlockQ5_1>(seed + 20);
    b51.d = half_of(0.0077f);
    b51.m = half_of(-0.13f);
    const std::array<int, 32> c51 = q5_codes(b51.qs, b51.qh);
    for (int j = 0; j < 32; ++j) {
      want[j] = static_cast<float>(c51[j]) * fp16_to_fp32(b51.d) + fp16_to_fp32(b51.m);
    }
    expect_decodes_to(DType::Q5_1, b51, want);
  }
}

TEST(DequantizeBlocks, Iq4NlAndIq4Xs) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto nl = random_block<BlockIQ4_NL>(seed);
    nl.d = half_of(0.00091f);
    std::vector<float> want(32);
    for (int j = 0; j < 16; ++j) {
      want[j] = fp16_to_fp32(nl.d) * static_cast<float>(kIq4[nl.qs[j] & 0xf]);
      want[j + 16] = fp16_to_fp32(nl.d) * static_cast<float>(kIq4[nl.qs[j] >> 4]);
    }
    expect_decodes_to(DType::IQ4_NL, nl, want);

    auto xs = random_block<BlockIQ4_XS>(seed + 10);
    xs.d = half_of(0.00043f);
    want.assign(256, 0.0f);
    const float d = fp16_to_fp32(xs.d);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((xs.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((xs.scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = xs.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        want[32 * ib + j] = dl * static_cast<float>(kIq4[qs[j] & 0xf]);
        want[32 * ib + j + 16] = dl * static_cast<float>(kIq4[qs[j] >> 4]);
      }
    }
    expect_decodes_to(DType::IQ4_XS, xs, want);
  }
}

TEST(DequantizeBlocks, Q2_KAndQ3_K) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto b2 = random_block<BlockQ2_K>(seed);
    b2.d = half_of(0.0021f);
    b2.dmin = half_of(0.0013f);
    std::vector<float> want(256);
    const float d = fp16_to_fp32(b2.d), dmin = fp16_to_fp32(b2.dmin);
    float* y = want.data();
    const uint8_t* q = b2.qs;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b2.scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
          }
        }
      }
      q += 32;
    }
    expect_decodes_to(DType::Q2_K, b2, want);

    auto b3 = random_block<BlockQ3_K>(seed + 10);
    b3.d = half_of(-0.0017f);
    // ggml's unpacking of the twelve scale bytes into sixteen 6-bit scales.
    uint32_t aux[4];
    std::memcpy(aux, b3.scales, 12);
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    y = want.data();
    q = b3.qs;
    is = 0;
    uint8_t m = 1;
    for (int n = 0; n < 256; n += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const float dl = fp16_to_fp32(b3.d) * static_cast<float>(scales[is++] - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((b3.hmask[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
    expect_decodes_to(DType::Q3_K, b3, want);
  }
}

// ggml's get_scale_min_k4, written out again.
void scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

TEST(DequantizeBlocks, Q4_KAndQ5_K) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto b4 = random_block<BlockQ4_K>(seed);
    auto b5 = random_block<BlockQ5_K>(seed + 10);
    b4.d = b5.d = half_of(0.00093f);
    b4.dmin = b5.dmin = half_of(0.0011f);
    std::vector<float> want4(256), want5(256);
    const float d = fp16_to_fp32(b4.d), dmin = fp16_to_fp32(b4.dmin);
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
      int sc, m;
      scale_min(is, b4.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min(is + 1, b4.scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      const uint8_t* q = b4.qs + j / 2;
      for (int l = 0; l < 32; ++l) want4[j + l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) want4[j + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;

      scale_min(is, b5.scales, &sc, &m);
      const float e1 = d * static_cast<float>(sc), n1 = dmin * static_cast<float>(m);
      scale_min(is + 1, b5.scales, &sc, &m);
      const float e2 = d * static_cast<float>(sc), n2 = dmin * static_cast<float>(m);
      const uint8_t* ql = b5.qs + j / 2;
      for (int l = 0; l < 32; ++l) {
        want5[j + l] = e1 * static_cast<float>((ql[l] & 0xF) + (b5.qh[l] & u1 ? 16 : 0)) - n1;
      }
      for (int l = 0; l < 32; ++l) {
        want5[j + 32 + l] = e2 * static_cast<float>((ql[l] >> 4) + (b5.qh[l] & u2 ? 16 : 0)) - n2;
      }
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
    expect_decodes_to(DType::Q4_K, b4, want4);
    expect_decodes_to(DType::Q5_K, b5, want5);
  }
}

TEST(DequantizeBlocks, Q6_K) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto b = random_block<BlockQ6_K>(seed);
    b.d = half_of(0.00031f);
    std::vector<float> want(256);
    const float d = fp16_to_fp32(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        want[n + l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        want[n + l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        want[n + l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        want[n + l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      ql += 64;
      qh += 32;
      sc += 8;
    }
    expect_decodes_to(DType::Q6_K, b, want);
  }
}

}  // namespace
}  // namespace hearth
