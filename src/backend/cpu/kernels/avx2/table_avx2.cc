// The AVX2 kernel table. Float conversion of whole rows of F32 is a copy, shared with the scalar
// table.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"
#include "backend/cpu/kernels/generic/generic_kernels.h"

namespace hearth::cpu::avx2 {

Kernels kernels() {
  Kernels k;
  k.isa = Isa::Avx2;
  k.f32 = {ActFormat::F32, nullptr, generic::f32_to_float};
  k.f16 = {ActFormat::F32, nullptr, f16_to_float};
  k.bf16 = {ActFormat::F32, nullptr, bf16_to_float};
  k.q8_0 = {ActFormat::Q8, quantize_act_q8, q8_0_to_float};
  k.q4_0 = {ActFormat::Q8, quantize_act_q8, q4_0_to_float};
  set_float_kernels(k);
  set_quant_kernels(k);
  // The block types start from the scalar references; vectorized entries replace them.
  generic::set_block_kernels(k);
  set_block_kernels(k);
  generic::set_row_group_kernels(k);
  set_row_group_kernels(k);
  set_axpy_kernels(k);
  k.fp32_to_fp16_row = avx2::fp32_to_fp16_row;
  k.fp16_to_fp32_row = avx2::fp16_to_fp32_row;
  return k;
}

}  // namespace hearth::cpu::avx2
