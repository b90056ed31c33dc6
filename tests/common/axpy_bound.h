// The extra error of the one-token axpy kernels that sum in 8-bit integers (Q4_0, Q8_0, Q4_K, Q6_K;
// generic_kernels.h, kAxpyGroup): per group of 32 active rows (ascending j) and per scale unit,
// s_j becomes S t_j with S = max|s_j| / 127 and |s_j - S t_j| <= S / 2, so output c's error is
// at most sum_g (S_g / 2) * sum_{j in g} |q_{j,c}|, q the integer code the type multiplies by
// its scale (Q4_0: nibble - 8; Q8_0: the byte; Q4_K: the nibble, its min term is exact; Q6_K:
// code - 32). That
// is the bound the dense matvec has from rounding its activations to 8 bits. Returned with 0.1%
// slack for the float rounding of s_j * (127 / m) and of S; 0 where the path is float math.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/kernels/generic/block_codes.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace hearth::test {

inline bool axpy_sums_in_integers(DType t, int64_t nt) {
  return nt == 1 &&
         (t == DType::Q4_0 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::Q6_K);
}

// Of row `row`'s weight c: the scale D * s of its unit and its integer code.
inline void axpy_unit_code(DType t, const uint8_t* row, int64_t c, double& scale, int& code) {
  const int64_t b = c / kQK, i = c % kQK;
  if (t == DType::Q4_0) {
    const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
    scale = fp16_to_fp32(blk.d);
    code = (i < 16 ? (blk.qs[i] & 0x0f) : (blk.qs[i - 16] >> 4)) - 8;
    return;
  }
  if (t == DType::Q8_0) {
    const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
    scale = fp16_to_fp32(blk.d);
    code = blk.qs[i];
    return;
  }
  cpu::generic::BlockCodes codes;
  if (t == DType::Q4_K) {
    cpu::generic::CodesQ4_K::get(row, b, codes);
  } else {
    cpu::generic::CodesQ6_K::get(row, b, codes);
  }
  scale = static_cast<double>(codes.d) * codes.s[i / 16];
  code = codes.q[i];
}

// sum_j |a_j| (|D s q_{j,c}| + |M m|): how large the float steps of the integer kernels' outputs
// (the scaled sums and the min terms, before they cancel) can get at column c, which bounds
// where the vector kernels' FMA and the reference's multiply-add round differently.
inline double axpy_int_magnitude(DType t, const uint8_t* w, size_t ldw, const int32_t* idx,
                                 int64_t nr, const float* a, int64_t c) {
  double sum = 0;
  for (int64_t j = 0; j < nr; ++j) {
    double scale;
    int code;
    const uint8_t* row = w + idx[j] * ldw;
    axpy_unit_code(t, row, c, scale, code);
    double min_term = 0;
    if (t == DType::Q4_K) {
      cpu::generic::BlockCodes codes;
      cpu::generic::CodesQ4_K::get(row, c / kQK, codes);
      min_term = std::fabs(static_cast<double>(codes.mf) * codes.m[0]);
    }
    sum += std::fabs(static_cast<double>(a[j])) * (std::fabs(scale * code) + min_term);
  }
  return sum;
}

inline double axpy_int_bound(DType t, const uint8_t* w, size_t ldw, const int32_t* idx, int64_t nr,
                             const float* a, int64_t nt, int64_t c) {
  if (!axpy_sums_in_integers(t, nt)) return 0.0;
  double bound = 0;
  int64_t j = 0;
  while (j < nr) {
    double m = 0, q_abs = 0;
    for (int count = 0; j < nr && count < 32; ++j) {
      if (a[j] == 0.0f) continue;
      ++count;
      double scale;
      int code;
      axpy_unit_code(t, w + idx[j] * ldw, c, scale, code);
      m = std::max(m, std::fabs(static_cast<double>(a[j]) * scale));
      q_abs += std::abs(code);
    }
    bound += m / 127 / 2 * q_abs;
  }
  return bound * 1.001;
}

}  // namespace hearth::test
