// Reads a Q8 activation row (kernels/act_layout.h) block by block, for the scalar references.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/act_layout.h"

namespace hearth::cpu::generic {

struct ActQ8 {
  const uint8_t* row;
  explicit ActQ8(const void* x) : row(static_cast<const uint8_t*>(x)) {}
  // Quant j (0..31) of block b.
  int8_t q(int64_t b, int64_t j) const {
    return static_cast<int8_t>(row[act_quant_offset(b, j)]);
  }
  // A block's quants are two runs of 16 bytes.
  const int8_t* first16(int64_t b) const {
    return reinterpret_cast<const int8_t*>(row + act_quant_offset(b, 0));
  }
  const int8_t* last16(int64_t b) const {
    return reinterpret_cast<const int8_t*>(row + act_quant_offset(b, kQK / 2));
  }
  float d(int64_t b) const {
    float v;
    std::memcpy(&v, row + act_scale_offset(b), sizeof v);
    return v;
  }
};

}  // namespace hearth::cpu::generic
