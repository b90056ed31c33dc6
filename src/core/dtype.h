// Tensor element types. The numeric values are ggml's type ids, so a GGUF tensor's type field
// converts directly. Hearth computes with the supported subset; the GGUF reader still knows the
// block geometry of every ggml type so it can validate (and `inspect` can list) any file. The
// block layouts of the types beyond Q8_0 and Q4_0 are in core/quant_blocks.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hearth {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

// Every type Hearth computes with, in ggml id order.
inline constexpr DType kSupportedTypes[] = {
    DType::F32,  DType::F16,  DType::Q4_0, DType::Q4_1, DType::Q5_0,   DType::Q5_1,   DType::Q8_0,
    DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS,
    DType::BF16};

// Block geometry of a ggml type: `block_size` elements are stored in `block_bytes` bytes.
struct GgmlTypeInfo {
  std::string_view name;
  int64_t block_size;
  int64_t block_bytes;
};

// Geometry for any ggml type id known to this build, or nullopt for an unknown id.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t ggml_type);

// True when Hearth has kernels for this ggml type id.
bool is_supported_dtype(uint32_t ggml_type);

// The supported types' names, comma-separated ("f32, f16, ..."), for error messages.
std::string_view supported_dtype_names();

std::string_view dtype_name(DType t);
int64_t dtype_block_size(DType t);
int64_t dtype_block_bytes(DType t);

// Bytes used by a row of n elements (n must be a multiple of the block size).
int64_t row_bytes(DType t, int64_t n);

// Parses a supported type's ggml name ("f16", "q4_k", "iq4_xs", ...; case-insensitive); nullopt
// otherwise.
std::optional<DType> parse_dtype(std::string_view name);

// ggml block layouts, bit-exact with ggml: a block is 32 weights sharing one f16 scale d.
inline constexpr int64_t kQK = 32;
struct BlockQ8_0 {
  uint16_t d;        // f16 scale
  int8_t qs[kQK];    // w = d * q
};
struct BlockQ4_0 {
  uint16_t d;             // f16 scale
  uint8_t qs[kQK / 2];    // low nibbles hold weights 0..15, high nibbles 16..31; w = d * (q - 8)
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace hearth
