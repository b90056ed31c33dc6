// Layout facts and checks shared by the GGUF reader and writer; not part of the public interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gguf/gguf.h"

namespace hearth::gguf::detail {

inline constexpr char kMagicGguf[4] = {'G', 'G', 'U', 'F'};
inline constexpr char kMagicPowerInfer[4] = {'P', 'W', 'R', 'I'};
inline constexpr uint32_t kWriteVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;
// ggml counts elements in int64; 2^62 leaves headroom for byte sizes of wide types.
inline constexpr uint64_t kMaxElements = uint64_t{1} << 62;
inline constexpr std::string_view kAlignmentKey = "general.alignment";

bool is_known_value_type(uint32_t t);
bool is_integer_type(ValueType t);

// Bytes of one scalar (or array element) of type t; 0 for STRING and ARRAY, whose size varies.
size_t scalar_size(ValueType t);

// Checks a tensor's ggml type and shape (n_dims entries of ne). On success stores the data size in
// *nbytes and returns an empty string; otherwise returns what is wrong, for the caller to prefix
// with the file and tensor name.
std::string check_tensor_geometry(uint32_t ggml_type, const uint64_t* ne, int n_dims,
                                  uint64_t* nbytes);

// A name taken from an untrusted file, made safe to print: control and non-ASCII bytes escaped,
// long names shortened.
std::string printable(std::string_view name);

}  // namespace hearth::gguf::detail
