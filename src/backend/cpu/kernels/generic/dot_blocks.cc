// Scalar references for the legacy, K-quant and IQ4 weight types: each block's integer codes
// (block_codes.h) against Q8 activation blocks, and the table entries of those types.
#include <cstdint>

#include "backend/cpu/kernels/act_layout.h"
#include "backend/cpu/kernels/generic/act_q8_reader.h"
#include "backend/cpu/kernels/generic/block_codes.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/quantize.h"

namespace hearth::cpu::generic {
namespace {

template <typename Codes>
float dot_codes(int64_t n, const void* w, const void* x) {
  const ActQ8 a(x);
  float lanes[kLanes] = {};
  BlockCodes c;
  for (int64_t b = 0; b < n / kQK; ++b) {
    Codes::get(w, b, c);
    int32_t isum = 0, msum = 0;
    for (int h = 0; h < 2; ++h) {
      int32_t qx = 0, xs = 0;
      for (int j = 16 * h; j < 16 * h + 16; ++j) {
        qx += c.q[j] * a.q(b, j);
        xs += a.q(b, j);
      }
      isum += c.s[h] * qx;
      msum += c.m[h] * xs;
    }
    const float dx = a.d(b);
    float& lane = lanes[act_lane(b % kActGroupBlocks)];
    lane += static_cast<float>(isum) * (c.d * dx);
    if constexpr (Codes::kHasMin) lane += static_cast<float>(msum) * (c.mf * dx);
  }
  return reduce_lanes(lanes);
}

template <DType T>
void to_float(const void* x, float* y, int64_t n) {
  dequantize_row(T, x, y, n);
}

// ggml pairs the 256-element types with Q8_K activations and the 32-element ones with Q8_0.
bool uses_q8k(DType t) { return dtype_block_size(t) == kQK_K; }

template <DType T, typename Codes>
WeightKernels entries() {
  WeightKernels k;
  k.act = uses_q8k(T) ? ActFormat::Q8K : ActFormat::Q8;
  k.to_act = uses_q8k(T) ? quantize_act_q8k : quantize_act_q8;
  k.to_float = to_float<T>;
  k.dot = dot_codes<Codes>;
  k.gemm = gemm_rows<dot_codes<Codes>>;
  k.gemm_gather = gemm_gather_rows<dot_codes<Codes>>;
  k.axpy = axpy_block_rows<T>;
  return k;
}

}  // namespace

void set_block_kernels(Kernels& k) {
  k.q4_1 = entries<DType::Q4_1, CodesQ4_1>();
  k.q5_0 = entries<DType::Q5_0, CodesQ5_0>();
  k.q5_1 = entries<DType::Q5_1, CodesQ5_1>();
  k.iq4_nl = entries<DType::IQ4_NL, CodesIQ4_NL>();
  k.q2_k = entries<DType::Q2_K, CodesQ2_K>();
  k.q3_k = entries<DType::Q3_K, CodesQ3_K>();
  k.q4_k = entries<DType::Q4_K, CodesQ4_K>();
  k.q5_k = entries<DType::Q5_K, CodesQ5_K>();
  k.q6_k = entries<DType::Q6_K, CodesQ6_K>();
  k.q4_k.axpy = axpy_block_int<DType::Q4_K>;
  k.q4_k.axpy_parts = axpy_block_int_parts<DType::Q4_K>;
  k.q6_k.axpy = axpy_block_int<DType::Q6_K>;
  k.q6_k.axpy_parts = axpy_block_int_parts<DType::Q6_K>;
  k.iq4_xs = entries<DType::IQ4_XS, CodesIQ4_XS>();
}

}  // namespace hearth::cpu::generic
