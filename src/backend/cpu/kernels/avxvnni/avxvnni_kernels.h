// AVX-VNNI variants of the quantized kernels. Every function here may execute AVX2 and AVX-VNNI
// instructions, so none may be called before dispatch has confirmed the CPU supports them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/dispatch.h"

namespace hearth::cpu::avxvnni {

// Sets dot, gemm and gemm_gather of the Q8_0 and Q4_0 entries to the VNNI tile and panel kernels.
void set_quant_kernels(Kernels& k);
// The same for the block types of core/quant_blocks.h.
void set_block_kernels(Kernels& k);
// The products over the 32-weight types' and Q6_K's row groups (row_groups_avxvnni.cc), over the
// AVX2 table's.
void set_row_group_kernels(Kernels& k);

// The AVX2 table with every quantized type's dot, gemm and gemm_gather kernels replaced.
Kernels kernels();

}  // namespace hearth::cpu::avxvnni
