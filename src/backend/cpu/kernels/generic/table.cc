// The scalar kernel table.
#include "backend/cpu/kernels/generic/generic_kernels.h"

namespace hearth::cpu::generic {

Kernels kernels() {
  Kernels k;
  k.isa = Isa::Scalar;
  k.f32 = {ActFormat::F32, nullptr, f32_to_float, dot_f32, gemm_rows<dot_f32>};
  k.f16 = {ActFormat::F32, nullptr, f16_to_float, dot_f16, gemm_rows<dot_f16>};
  k.bf16 = {ActFormat::F32, nullptr, bf16_to_float, dot_bf16, gemm_rows<dot_bf16>};
  k.q8_0 = {ActFormat::Q8, quantize_act_q8, q8_0_to_float, dot_q8_0, gemm_rows<dot_q8_0>};
  k.q4_0 = {ActFormat::Q8, quantize_act_q8, q4_0_to_float, dot_q4_0, gemm_rows<dot_q4_0>};
  k.fp32_to_fp16_row = generic::fp32_to_fp16_row;
  k.fp16_to_fp32_row = generic::fp16_to_fp32_row;
  return k;
}

}  // namespace hearth::cpu::generic
