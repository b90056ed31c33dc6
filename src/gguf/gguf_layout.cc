#include <cstdio>

#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf_internal.h"

namespace hearth::gguf::detail {

bool is_known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64:
      return true;
    default:
      return false;
  }
}

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
    case ValueType::ARRAY:
      return 0;
  }
  return 0;
}

std::string check_tensor_geometry(uint32_t ggml_type, const uint64_t* ne, int n_dims,
                                  uint64_t* nbytes) {
  if (n_dims < 1 || n_dims > kMaxDims) {
    return str_cat(n_dims, " dimensions (expected 1 to ", kMaxDims, ")");
  }
  uint64_t n_elements = 1;
  for (int d = 0; d < n_dims; ++d) {
    if (ne[d] == 0) return str_cat("dimension ", d, " is zero");
    if (ne[d] > kMaxElements) {
      return str_cat("dimension ", d, " is ", ne[d], " (more than 2^62)");
    }
    // Two factors below 2^62 can still overflow 64 bits, hence the checked multiply.
    if (__builtin_mul_overflow(n_elements, ne[d], &n_elements) || n_elements > kMaxElements) {
      return "more than 2^62 elements in total";
    }
  }
  const auto info = ggml_type_info(ggml_type);
  if (!info) return str_cat("unknown ggml type id ", ggml_type);
  const auto block_size = static_cast<uint64_t>(info->block_size);
  if (ne[0] % block_size != 0) {
    return str_cat("row length ", ne[0], " is not a multiple of the ", info->name, " block size ",
                   block_size);
  }
  if (__builtin_mul_overflow(n_elements / block_size, static_cast<uint64_t>(info->block_bytes),
                             nbytes)) {
    return "data size overflows 64 bits";
  }
  return {};
}

std::string printable(std::string_view name) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    }
  }
  if (name.size() > kMaxShown) out += str_cat("... (", name.size(), " bytes)");
  return out;
}

}  // namespace hearth::gguf::detail
