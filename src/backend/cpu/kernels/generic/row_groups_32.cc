// Row groups of the 32-weight block types Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (kernels/row_groups.h):
// rewriting 16 rows as a group, and the scalar references of the products over groups. A group
// column is one block of each row against one Q8 activation block, so a row's sum is exact in
// integers per block and finished per block by FMAs in block order; the vector kernels do the same
// operations in the same order, so every ISA gives these bits.
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "backend/cpu/kernels/row_groups.h"
#include "core/fp16.h"

namespace hearth::cpu::generic {
namespace {

// Row r's code u of weight l (0..31), as the kernels meet it (group_offset_shift): the nibble,
// with Q5's fifth bit (bit l / 4 of byte 4 r + l % 4 of high) at bit 4, or IQ4_NL's table value
// plus 128.
template <typename Group>
int code(const Group& g, int r, int l) {
  const int byte = g.codes[l % 16 / 4][4 * r + l % 4];
  const int nibble = l < 16 ? byte & 15 : byte >> 4;
  if constexpr (std::is_same_v<Group, GroupIQ4_NL>) return kIq4nlValues[nibble] + 128;
  if constexpr (requires { g.high; }) return nibble | ((g.high[4 * r + l % 4] >> (l / 4)) & 1) << 4;
  return nibble;
}

template <typename Group>
void to_row_group_32(int64_t n, const void* w, size_t ldw, void* out) {
  using Block = typename Group::Block;
  constexpr bool kMin = requires(const Group& gr) { gr.m; };
  constexpr bool kHigh = requires(const Group& gr) { gr.high; };
  const auto* rows = static_cast<const uint8_t*>(w);
  auto* groups = static_cast<Group*>(out);
  for (int64_t c = 0; c < n / kQK; ++c) {
    Group& g = groups[c];
    std::memset(&g, 0, sizeof g);
    for (int r = 0; r < kGroupRows; ++r) {
      const Block& b = reinterpret_cast<const Block*>(rows + r * ldw)[c];
      for (int w4 = 0; w4 < 4; ++w4) {
        for (int i = 0; i < 4; ++i) g.codes[w4][4 * r + i] = b.qs[4 * w4 + i];
      }
      g.d[r] = b.d;
      if constexpr (kMin) g.m[r] = b.m;
      if constexpr (kHigh) {
        for (int l = 0; l < kQK; ++l) {
          const int bit = (b.qh[l / 8] >> (l % 8)) & 1;
          g.high[4 * r + l % 4] |= static_cast<uint8_t>(bit << (l / 4));
        }
      }
    }
  }
}

// One row r of a group against one activation row: per block, the integer dot product of the
// codes (the offset taken off exactly), then sum = fma(d dx, dot, sum), and for the types with a
// min mins = fma(m, dx sum(x), mins), the result sum + mins.
template <typename Group>
float row_32(int64_t n, const Group* g, int r, const uint8_t* x) {
  constexpr bool kMin = requires(const Group& gr) { gr.m; };
  float sum = 0.0f, mins = 0.0f;
  for (int64_t c = 0; c < n / kQK; ++c) {
    const auto* q = reinterpret_cast<const int8_t*>(x);
    int32_t dot = 0;
    for (int l = 0; l < kQK; ++l) dot += code(g[c], r, l) * q[act_quant_offset(c, l)];
    float dx;
    int32_t sx;
    std::memcpy(&dx, x + act_scale_offset(c), sizeof dx);
    std::memcpy(&sx, x + act_sum_offset(c), sizeof sx);
    if constexpr (kMin) {
      sum = std::fma(fp16_to_fp32(g[c].d[r]) * dx, static_cast<float>(dot), sum);
      mins = std::fma(fp16_to_fp32(g[c].m[r]), dx * static_cast<float>(sx), mins);
    } else {
      const int32_t exact = dot - sx * (1 << group_offset_shift<Group>());
      sum = std::fma(fp16_to_fp32(g[c].d[r]) * dx, static_cast<float>(exact), sum);
    }
  }
  return kMin ? sum + mins : sum;
}

template <typename Group>
void gemm_row_groups_32(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                        int64_t nt, float* y, size_t ldy) {
  for (int64_t gi = 0; gi < ng; ++gi) {
    const auto* g =
        reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
    for (int64_t t = 0; t < nt; ++t) {
      const uint8_t* xt = static_cast<const uint8_t*>(x) + t * ldx;
      for (int r = 0; r < kGroupRows; ++r) y[t * ldy + gi * kGroupRows + r] = row_32(n, g, r, xt);
    }
  }
}

template <typename Group>
void set_32(WeightKernels& k) {
  k.to_row_group = to_row_group_32<Group>;
  k.gemm_row_groups = gemm_row_groups_32<Group>;
}

}  // namespace

void set_row_group_32_kernels(Kernels& k) {
  set_32<GroupQ4_0>(k.q4_0);
  set_32<GroupQ4_1>(k.q4_1);
  set_32<GroupQ5_0>(k.q5_0);
  set_32<GroupQ5_1>(k.q5_1);
  set_32<GroupIQ4_NL>(k.iq4_nl);
}

}  // namespace hearth::cpu::generic
