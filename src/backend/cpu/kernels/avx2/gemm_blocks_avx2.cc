// The block types of core/quant_blocks.h (legacy Q4_1/Q5_0/Q5_1, the K-quants, IQ4_NL/IQ4_XS)
// in the AVX2 table.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

namespace hearth::cpu::avx2 {

void set_block_kernels(Kernels& k) {
  // Activation rows are the same bits from either quantizer.
  for (WeightKernels* w : {&k.q4_1, &k.q5_0, &k.q5_1, &k.iq4_nl, &k.q2_k, &k.q3_k, &k.q4_k,
                           &k.q5_k, &k.q6_k, &k.iq4_xs}) {
    w->to_act = quantize_act_q8;
  }
}

}  // namespace hearth::cpu::avx2
