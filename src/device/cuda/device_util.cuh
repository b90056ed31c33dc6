// Device-side helpers shared by the kernels: warp reductions, weight element decoding and the
// dtype dispatch of launchers. Included by .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "device/cuda/kernel_types.h"
#include "core/error.h"

namespace hearth::gpu {

// Sum over the 32 lanes of a warp, every lane getting the result. The butterfly order is fixed,
// so results are deterministic.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

// Element j of a weight row of dtype T in ggml's layout, as a float. Exact for every type: the
// value the host's dequantize_row gives (Q8_0: d·q, Q4_0: d·(q - 8), element i < 16 of a block
// in the low nibble of byte i, element i + 16 in its high nibble).
template <DType T>
__device__ __forceinline__ float load_elem(const uint8_t* row, int64_t j) {
  if constexpr (T == DType::F32) {
    return reinterpret_cast<const float*>(row)[j];
  } else if constexpr (T == DType::F16) {
    return half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[j]);
  } else if constexpr (T == DType::BF16) {
    return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[j]) << 16);
  } else if constexpr (T == DType::Q8_0) {
    const uint8_t* block = row + (j / kQK) * static_cast<int64_t>(sizeof(BlockQ8_0));
    const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(block));
    const int8_t q = reinterpret_cast<const int8_t*>(block + 2)[j % kQK];
    return d * static_cast<float>(q);
  } else {
    static_assert(T == DType::Q4_0);
    const uint8_t* block = row + (j / kQK) * static_cast<int64_t>(sizeof(BlockQ4_0));
    const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(block));
    const int i = static_cast<int>(j % kQK);
    const uint8_t byte = block[2 + (i & 15)];
    const int q = i < 16 ? (byte & 0x0f) : (byte >> 4);
    return d * static_cast<float>(q - 8);
  }
}

// Calls f(std::integral_constant<DType, t>{}) so that a launcher can instantiate its kernel for
// the weight type it is given at run time.
template <typename F>
void dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      return f(std::integral_constant<DType, DType::F32>{});
    case DType::F16:
      return f(std::integral_constant<DType, DType::F16>{});
    case DType::BF16:
      return f(std::integral_constant<DType, DType::BF16>{});
    case DType::Q8_0:
      return f(std::integral_constant<DType, DType::Q8_0>{});
    case DType::Q4_0:
      return f(std::integral_constant<DType, DType::Q4_0>{});
    default:
      break;
  }
  fail("the CUDA backend has no kernels for weights of type ", dtype_name(t));
}

inline unsigned blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

}  // namespace hearth::gpu
