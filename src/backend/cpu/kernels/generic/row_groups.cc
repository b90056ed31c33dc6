// Row groups of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (kernels/row_groups.h): rewriting 16 rows
// as a group, and the scalar references of the products over groups. The vector kernels reach the
// same integers and finish each row with the same float operations in the same order, so every ISA
// gives these bits.
#include "backend/cpu/kernels/row_groups.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/fp16.h"

namespace hearth::cpu::generic {
namespace {

// Row r's 2-bit codes (a block's qs) into a group's codes.
void put_crumbs(const uint8_t* qs, int r, uint8_t (&codes)[16][64]) {
  for (int q = 0; q < 4; ++q) {
    for (int w = 0; w < 4; ++w) {
      for (int i = 0; i < 4; ++i) {
        int byte = 0;
        for (int k = 0; k < 4; ++k) byte |= q2k_code(qs, 16 * (4 * q + k) + 4 * w + i) << (2 * k);
        codes[4 * q + w][4 * r + i] = static_cast<uint8_t>(byte);
      }
    }
  }
}

// Row r's 2-bit code of weight l (0..15) of sub-block j in a group's codes.
int crumb(const uint8_t (&codes)[16][64], int r, int j, int l) {
  return (codes[4 * (j / 4) + l / 4][4 * r + l % 4] >> (2 * (j % 4))) & 3;
}

// The int16 sum of 16 of sub-block j in the activation super-block at xs.
int32_t sum16(const uint8_t* xs, int j) {
  int16_t s;
  std::memcpy(&s, xs + act_sum16_pair_offset(j / 2) + 2 * (j % 2), sizeof s);
  return s;
}

// Sub-block j's 16 activation quants.
const int8_t* quants(const uint8_t* xs, int j) {
  return reinterpret_cast<const int8_t*>(xs + act_sub16_offset(j));
}

// The activation super-block's float scale.
float act_scale(const uint8_t* xs) {
  float dx;
  std::memcpy(&dx, xs + kActScalesOffset, sizeof dx);
  return dx;
}

// One column's integer sums of a row: with mins, sum_j scale_j (codes . x) and sum_j min_j
// (sum of x); without, sum_j scale_j (codes . x) and the offset's sum_j scale_j (sum of x).
struct ColumnSums {
  int32_t total, other;
};

// A row's sum over the super-block columns, as the vector kernels form it: sums(gc, xs) gives a
// column's ColumnSums (xs its activation super-block), finished for groups with mins (a dmin
// field) as d dx total - dmin dx other in two running sums, else as d dx (total - 2^OffsetShift
// other), each an FMA in column order.
template <int OffsetShift, typename Group, typename Sums>
float row_sum(int64_t n, const Group* g, int r, const uint8_t* x, const Sums& sums) {
  constexpr bool kMins = requires(const Group& gr) { gr.dmin; };
  float sum = 0.0f, mins = 0.0f;
  for (int64_t c = 0; c < n / kQK_K; ++c) {
    const uint8_t* xs = x + c * kActGroupBytes;
    const ColumnSums s = sums(g[c], xs);
    const float dx = act_scale(xs);
    if constexpr (kMins) {
      sum = std::fma(fp16_to_fp32(g[c].d[r]) * dx, static_cast<float>(s.total), sum);
      mins = std::fma(fp16_to_fp32(g[c].dmin[r]) * dx, static_cast<float>(s.other), mins);
    } else {
      const int32_t exact = s.total - s.other * (1 << OffsetShift);
      sum = std::fma(fp16_to_fp32(g[c].d[r]) * dx, static_cast<float>(exact), sum);
    }
  }
  return kMins ? sum - mins : sum;
}

void to_row_group_q2_k(int64_t n, const void* w, size_t ldw, void* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  auto* groups = static_cast<GroupQ2_K*>(out);
  for (int64_t c = 0; c < n / kQK_K; ++c) {
    GroupQ2_K& g = groups[c];
    for (int r = 0; r < kGroupRows; ++r) {
      const auto& b = reinterpret_cast<const BlockQ2_K*>(rows + r * ldw)[c];
      for (int j = 0; j < 16; ++j) g.scales[j / 2][2 * r + j % 2] = b.scales[j];
      g.d[r] = b.d;
      g.dmin[r] = b.dmin;
      put_crumbs(b.qs, r, g.codes);
    }
  }
}

// One row r of a Q2_K group against one activation row.
float row_q2_k(int64_t n, const GroupQ2_K* g, int r, const uint8_t* x) {
  return row_sum<0>(n, g, r, x, [r](const GroupQ2_K& gc, const uint8_t* xs) {
    ColumnSums s{0, 0};
    for (int j = 0; j < 16; ++j) {
      const int8_t* q = quants(xs, j);
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += crumb(gc.codes, r, j, l) * q[l];
      const int byte = gc.scales[j / 2][2 * r + j % 2];
      s.total += (byte & 15) * dot;
      s.other += (byte >> 4) * sum16(xs, j);
    }
    return s;
  });
}

void to_row_group_q3_k(int64_t n, const void* w, size_t ldw, void* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  auto* groups = static_cast<GroupQ3_K*>(out);
  for (int64_t c = 0; c < n / kQK_K; ++c) {
    GroupQ3_K& g = groups[c];
    std::memset(&g, 0, sizeof g);
    for (int r = 0; r < kGroupRows; ++r) {
      const auto& b = reinterpret_cast<const BlockQ3_K*>(rows + r * ldw)[c];
      put_crumbs(b.qs, r, g.codes);
      for (int j = 0; j < 16; ++j) {
        const int scale = q3k_scale(b.scales, j), p = j / 2;
        g.scale_low[p][r] |= static_cast<uint8_t>((scale & 15) << (4 * (j % 2)));
        g.scale_high[p % 4][r] |= static_cast<uint8_t>((scale >> 4) << (4 * (p / 4) + 2 * (j % 2)));
        for (int l = 0; l < 16; ++l) {
          const int e = 16 * j + l;
          const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
          g.high[2 * (j / 4) + l / 8][4 * r + l % 4] |=
              static_cast<uint8_t>(high << ((j % 4) + 4 * (l / 4 % 2)));
        }
      }
      g.d[r] = b.d;
    }
  }
}

// Row r's high bit of weight l of sub-block j in a Q3_K group.
int high_bit(const GroupQ3_K& g, int r, int j, int l) {
  return (g.high[2 * (j / 4) + l / 8][4 * r + l % 4] >> ((j % 4) + 4 * (l / 4 % 2))) & 1;
}

// One row r of a Q3_K group against one activation row (the codes' offset of 4 inside the dot
// products: the same integers as taking it off after).
float row_q3_k(int64_t n, const GroupQ3_K* g, int r, const uint8_t* x) {
  return row_sum<2>(n, g, r, x, [r](const GroupQ3_K& gc, const uint8_t* xs) {
    ColumnSums s{0, 0};
    for (int j = 0; j < 16; ++j) {
      const int8_t* q = quants(xs, j);
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) {
        dot += (crumb(gc.codes, r, j, l) + 4 * high_bit(gc, r, j, l) - 4) * q[l];
      }
      s.total += (group_q3_k_scale(gc, r, j) - 32) * dot;
    }
    return s;
  });
}

// Q4_K's and Q5_K's groups (Block BlockQ4_K or BlockQ5_K): Q5_K adds its fifth bits.
template <typename Group, typename Block>
void to_row_group_q45_k(int64_t n, const void* w, size_t ldw, void* out) {
  constexpr bool kFifth = requires(const Group& gr) { gr.high; };
  const auto* rows = static_cast<const uint8_t*>(w);
  auto* groups = static_cast<Group*>(out);
  for (int64_t c = 0; c < n / kQK_K; ++c) {
    Group& g = groups[c];
    std::memset(&g, 0, sizeof g);
    for (int r = 0; r < kGroupRows; ++r) {
      const auto& b = reinterpret_cast<const Block*>(rows + r * ldw)[c];
      for (int j = 0; j < 8; ++j) {
        const ScaleMin sm = k4_scale_min(b.scales, j);
        g.scale_low[j][r] = static_cast<uint8_t>((sm.scale & 15) | (sm.min & 15) << 4);
        g.scale_high[j / 2][r] |=
            static_cast<uint8_t>(((sm.scale >> 4) | (sm.min >> 4) << 2) << (4 * (j % 2)));
      }
      for (int m = 0; m < 4; ++m) {
        for (int q = 0; q < 8; ++q) {
          for (int i = 0; i < 4; ++i) {
            const int e = 64 * m + 4 * q + i;
            g.codes[8 * m + q][4 * r + i] =
                static_cast<uint8_t>(q4k_code(b.qs, e) | q4k_code(b.qs, e + 32) << 4);
          }
        }
      }
      if constexpr (kFifth) {
        for (int e = 0; e < kQK_K; ++e) {
          const int j = e / 32, l = e % 32;
          g.high[l / 4][4 * r + l % 4] |= static_cast<uint8_t>(((b.qh[l] >> j) & 1) << j);
        }
      }
      g.d[r] = b.d;
      g.dmin[r] = b.dmin;
    }
  }
}

// One row r of a Q4_K or Q5_K group against one activation row.
template <typename Group>
float row_q45_k(int64_t n, const Group* g, int r, const uint8_t* x) {
  return row_sum<0>(n, g, r, x, [r](const Group& gc, const uint8_t* xs) {
    ColumnSums s{0, 0};
    for (int j = 0; j < 8; ++j) {
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        const int byte = gc.codes[8 * (j / 2) + l / 4][4 * r + l % 4];
        int u = j % 2 ? byte >> 4 : byte & 15;
        if constexpr (requires { gc.high; }) u |= ((gc.high[l / 4][4 * r + l % 4] >> j) & 1) << 4;
        dot += u * quants(xs, 2 * j + l / 16)[l % 16];
      }
      const ScaleMin sm = group_q4_k_scale_min(gc, r, j);
      s.total += sm.scale * dot;
      s.other += sm.min * (sum16(xs, 2 * j) + sum16(xs, 2 * j + 1));
    }
    return s;
  });
}

void to_row_group_iq4_xs(int64_t n, const void* w, size_t ldw, void* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  auto* groups = static_cast<GroupIQ4_XS*>(out);
  for (int64_t c = 0; c < n / kQK_K; ++c) {
    GroupIQ4_XS& g = groups[c];
    for (int r = 0; r < kGroupRows; ++r) {
      const auto& b = reinterpret_cast<const BlockIQ4_XS*>(rows + r * ldw)[c];
      for (int v = 0; v < 32; ++v) {
        for (int i = 0; i < 4; ++i) g.codes[v][4 * r + i] = b.qs[4 * v + i];
      }
      for (int p = 0; p < 4; ++p) g.scale_low[p][r] = b.scales_l[p];
      g.scale_high[r] = b.scales_h;
      g.d[r] = b.d;
    }
  }
}

void to_row_group_q6_k(int64_t n, const void* w, size_t ldw, void* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  auto* groups = static_cast<GroupQ6_K*>(out);
  for (int64_t c = 0; c < n / kQK_K; ++c) {
    GroupQ6_K& g = groups[c];
    std::memset(&g, 0, sizeof g);
    for (int r = 0; r < kGroupRows; ++r) {
      const auto& b = reinterpret_cast<const BlockQ6_K*>(rows + r * ldw)[c];
      for (int m = 0; m < 4; ++m) {
        for (int q = 0; q < 8; ++q) {
          for (int i = 0; i < 4; ++i) {
            for (int e = 0; e < 2; ++e) {
              const int u = q6k_code(b, 32 * (2 * m + e) + 4 * q + i);
              g.low[8 * m + q][4 * r + i] |= static_cast<uint8_t>((u & 15) << (4 * e));
              g.high[4 * m + q % 4][4 * r + i] |=
                  static_cast<uint8_t>((u >> 4) << (2 * (e + 2 * (q / 4))));
            }
          }
        }
      }
      for (int j = 0; j < 16; ++j) g.scales[j][r] = b.scales[j];
      g.d[r] = b.d;
    }
  }
}

// Row r's 6-bit code (before the -32) of weight l (0..31) of 32-block b in a Q6_K group.
int q6_k_code(const GroupQ6_K& g, int r, int b, int l) {
  const int m = b / 2, e = b % 2, q = l / 4, i = l % 4;
  const int low = (g.low[8 * m + q][4 * r + i] >> (4 * e)) & 15;
  const int high = (g.high[4 * m + q % 4][4 * r + i] >> (2 * (e + 2 * (q / 4)))) & 3;
  return low | high << 4;
}

// One row r of a Q6_K group against one activation row (the offset of 32 inside the dot
// products).
float row_q6_k(int64_t n, const GroupQ6_K* g, int r, const uint8_t* x) {
  return row_sum<5>(n, g, r, x, [r](const GroupQ6_K& gc, const uint8_t* xs) {
    ColumnSums s{0, 0};
    for (int j = 0; j < 16; ++j) {
      const int8_t* q = quants(xs, j);
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += (q6_k_code(gc, r, j / 2, 16 * (j % 2) + l) - 32) * q[l];
      s.total += gc.scales[j][r] * dot;
    }
    return s;
  });
}

// One row r of an IQ4_XS group against one activation row: codes t[u] + 128, the 128 taken off
// through the offset sum.
float row_iq4_xs(int64_t n, const GroupIQ4_XS* g, int r, const uint8_t* x) {
  return row_sum<7>(n, g, r, x, [r](const GroupIQ4_XS& gc, const uint8_t* xs) {
    ColumnSums s{0, 0};
    for (int j = 0; j < 8; ++j) {
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        const int byte = gc.codes[4 * j + l % 16 / 4][4 * r + l % 4];
        const int u = l < 16 ? byte & 15 : byte >> 4;
        dot += (kIq4nlValues[u] + 128) * quants(xs, 2 * j + l / 16)[l % 16];
      }
      const int ls = ((gc.scale_low[j / 2][r] >> (4 * (j % 2))) & 15) |
                     ((gc.scale_high[r] >> (2 * j)) & 3) << 4;
      s.total += (ls - 32) * dot;
      s.other += (ls - 32) * (sum16(xs, 2 * j) + sum16(xs, 2 * j + 1));
    }
    return s;
  });
}

// The product over groups of one type, row by row through Row.
template <typename Group, float (*Row)(int64_t, const Group*, int, const uint8_t*)>
void gemm_row_groups(int64_t n, const void* w, size_t ldw, int64_t ng, const void* x, size_t ldx,
                     int64_t nt, float* y, size_t ldy) {
  for (int64_t gi = 0; gi < ng; ++gi) {
    const auto* g =
        reinterpret_cast<const Group*>(static_cast<const uint8_t*>(w) + gi * kGroupRows * ldw);
    for (int64_t t = 0; t < nt; ++t) {
      const uint8_t* xt = static_cast<const uint8_t*>(x) + t * ldx;
      for (int r = 0; r < kGroupRows; ++r) y[t * ldy + gi * kGroupRows + r] = Row(n, g, r, xt);
    }
  }
}

}  // namespace

void set_row_group_kernels(Kernels& k) {
  k.q2_k.to_row_group = to_row_group_q2_k;
  k.q2_k.gemm_row_groups = gemm_row_groups<GroupQ2_K, row_q2_k>;
  k.q3_k.to_row_group = to_row_group_q3_k;
  k.q3_k.gemm_row_groups = gemm_row_groups<GroupQ3_K, row_q3_k>;
  k.q4_k.to_row_group = to_row_group_q45_k<GroupQ4_K, BlockQ4_K>;
  k.q4_k.gemm_row_groups = gemm_row_groups<GroupQ4_K, row_q45_k<GroupQ4_K>>;
  k.q5_k.to_row_group = to_row_group_q45_k<GroupQ5_K, BlockQ5_K>;
  k.q5_k.gemm_row_groups = gemm_row_groups<GroupQ5_K, row_q45_k<GroupQ5_K>>;
  k.q6_k.to_row_group = to_row_group_q6_k;
  k.q6_k.gemm_row_groups = gemm_row_groups<GroupQ6_K, row_q6_k>;
  k.iq4_xs.to_row_group = to_row_group_iq4_xs;
  k.iq4_xs.gemm_row_groups = gemm_row_groups<GroupIQ4_XS, row_iq4_xs>;
  set_row_group_32_kernels(k);
}

}  // namespace hearth::cpu::generic
