// Entry points of the ops' AVX-512 variants. Defined in this folder's files (compiled with
// AVX-512 F/BW/VL/DQ); callable only when the CPU context's ISA says the machine has them.
#pragma once

#include "backend/cpu/dispatch.h"

namespace hearth::attention_detail {
struct Tile;
}  // namespace hearth::attention_detail

namespace hearth::ops_avx512 {

inline bool enabled(cpu::Isa isa) { return isa == cpu::Isa::Avx512; }

// attention_avx512.cc: the AVX2 tile kernel's results (ops_avx2::attention_tile), bit for bit,
// with each FMA over 16 lanes.
void attention_tile(const attention_detail::Tile& tile);

}  // namespace hearth::ops_avx512
