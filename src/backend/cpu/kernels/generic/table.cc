// The scalar kernel table.
#include "backend/cpu/kernels/generic/generic_kernels.h"

namespace hearth::cpu::generic {
namespace {

// One weight type's entries: the gemm and gemm_gather loops over its reference dot product.
template <float (*Dot)(int64_t, const void*, const void*)>
WeightKernels entries(ActFormat act, decltype(WeightKernels::to_act) to_act,
                      decltype(WeightKernels::to_float) to_float) {
  return {act, to_act, to_float, Dot, gemm_rows<Dot>, gemm_gather_rows<Dot>};
}

}  // namespace

Kernels kernels() {
  Kernels k;
  k.isa = Isa::Scalar;
  k.f32 = entries<dot_f32>(ActFormat::F32, nullptr, f32_to_float);
  k.f16 = entries<dot_f16>(ActFormat::F32, nullptr, f16_to_float);
  k.bf16 = entries<dot_bf16>(ActFormat::F32, nullptr, bf16_to_float);
  for (WeightKernels* f : {&k.f32, &k.f16, &k.bf16}) f->dot_lanes = kLanes;
  k.q8_0 = entries<dot_q8_0>(ActFormat::Q8, quantize_act_q8, q8_0_to_float);
  k.q4_0 = entries<dot_q4_0>(ActFormat::Q8, quantize_act_q8, q4_0_to_float);
  set_axpy_kernels(k);
  set_block_kernels(k);
  set_row_group_kernels(k);
  k.fp32_to_fp16_row = generic::fp32_to_fp16_row;
  k.fp16_to_fp32_row = generic::fp16_to_fp32_row;
  return k;
}

}  // namespace hearth::cpu::generic
