#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace hearth {
namespace {

struct TypeRow {
  uint32_t id;
  GgmlTypeInfo info;
};

// Block geometry of ggml's types, by id. Only used to validate sizes and to name types; which of
// them Hearth can compute with is decided by is_supported_dtype().
constexpr std::array<TypeRow, 29> kGgmlTypes = {{
    {0, {"f32", 1, 4}},        {1, {"f16", 1, 2}},         {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},     {6, {"q5_0", 32, 22}},      {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},     {9, {"q8_1", 32, 36}},      {10, {"q2_k", 256, 84}},
    {11, {"q3_k", 256, 110}},  {12, {"q4_k", 256, 144}},   {13, {"q5_k", 256, 176}},
    {14, {"q6_k", 256, 210}},  {15, {"q8_k", 256, 292}},   {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}}, {18, {"iq3_xxs", 256, 98}}, {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},  {21, {"iq3_s", 256, 110}},  {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}}, {24, {"i8", 1, 1}},        {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},       {27, {"i64", 1, 8}},        {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},  {30, {"bf16", 1, 2}},
}};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t ggml_type) {
  for (const auto& row : kGgmlTypes) {
    if (row.id == ggml_type) return row.info;
  }
  return std::nullopt;
}

bool is_supported_dtype(uint32_t ggml_type) {
  for (DType t : kSupportedTypes) {
    if (static_cast<uint32_t>(t) == ggml_type) return true;
  }
  return false;
}

std::string_view supported_dtype_names() {
  static const std::string names = [] {
    std::string s;
    for (DType t : kSupportedTypes) {
      if (!s.empty()) s += ", ";
      s += dtype_name(t);
    }
    return s;
  }();
  return names;
}

std::string_view dtype_name(DType t) { return ggml_type_info(static_cast<uint32_t>(t))->name; }
int64_t dtype_block_size(DType t) { return ggml_type_info(static_cast<uint32_t>(t))->block_size; }
int64_t dtype_block_bytes(DType t) { return ggml_type_info(static_cast<uint32_t>(t))->block_bytes; }

int64_t row_bytes(DType t, int64_t n) {
  const auto info = *ggml_type_info(static_cast<uint32_t>(t));
  if (n % info.block_size != 0) {
    fail("a row of ", n, " elements is not a whole number of ", info.name, " blocks (",
         info.block_size, ")");
  }
  return n / info.block_size * info.block_bytes;
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (DType t : kSupportedTypes) {
    if (dtype_name(t) == lower) return t;
  }
  return std::nullopt;
}

}  // namespace hearth
