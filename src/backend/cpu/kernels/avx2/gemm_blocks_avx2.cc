// The block types of core/quant_blocks.h (legacy Q4_1/Q5_0/Q5_1, the K-quants, IQ4_NL/IQ4_XS)
// in the AVX2 table: the block tile engine (block_tiles.h) with maddubs/madd products.
#include "backend/cpu/kernels/avx2/avx2_kernels.h"

// Last, in its own block: it switches on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats.h"

namespace hearth::cpu::avx2 {
namespace {

// A private copy of the AVX2 products, so the formats' instantiations stay in this file.
struct Dp : MaddAvx2 {};

}  // namespace

void set_block_kernels(Kernels& k) {
  // The vector quantizer of the activation format the scalar table chose (the same bits).
  for (WeightKernels* w : {&k.q4_1, &k.q5_0, &k.q5_1, &k.iq4_nl, &k.q2_k, &k.q3_k, &k.q4_k, &k.q5_k,
                           &k.q6_k, &k.iq4_xs}) {
    w->to_act = w->act == ActFormat::Q8K ? quantize_act_q8k : quantize_act_q8;
  }
  set_block_format_kernels<Dp>(k);
}

}  // namespace hearth::cpu::avx2
