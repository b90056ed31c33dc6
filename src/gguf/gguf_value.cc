// Metadata lookup, typed getters and the text rendering used by `hearth inspect`.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"

namespace hearth::gguf {

using detail::printable;

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An integer scalar or array element, widened. Unsigned and signed are kept apart so that a u64
// above INT64_MAX is reported instead of wrapping.
struct Integer {
  bool is_unsigned;
  uint64_t u;
  int64_t i;
};

Integer load_integer(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::U8: return {true, load<uint8_t>(p), 0};
    case ValueType::U16: return {true, load<uint16_t>(p), 0};
    case ValueType::U32: return {true, load<uint32_t>(p), 0};
    case ValueType::U64: return {true, load<uint64_t>(p), 0};
    case ValueType::I8: return {false, 0, load<int8_t>(p)};
    case ValueType::I16: return {false, 0, load<int16_t>(p)};
    case ValueType::I32: return {false, 0, load<int32_t>(p)};
    default: return {false, 0, load<int64_t>(p)};
  }
}

double load_float(ValueType t, const uint8_t* p) {
  if (t == ValueType::F32) return load<float>(p);
  if (t == ValueType::F64) return load<double>(p);
  const Integer n = load_integer(t, p);
  return n.is_unsigned ? static_cast<double>(n.u) : static_cast<double>(n.i);
}

// Shortest text that reads back as the same value (floats keep their own precision).
std::string number_text(ValueType t, double f) {
  char buf[64];
  const auto r = t == ValueType::F32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(f))
                                     : std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, r.ptr);
}

std::string quoted(std::string_view s) {
  constexpr size_t kMaxShown = 120;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        // UTF-8 bytes pass through (token text is shown as is); other control bytes are escaped.
        if (c < 0x20 || c == 0x7f) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\x%02x", c);
          out += esc;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  if (s.size() > kMaxShown) out += str_cat("... (", s.size(), " bytes)");
  return out;
}

std::string element_text(ValueType t, const uint8_t* p) {
  if (t == ValueType::BOOL) return *p != 0 ? "true" : "false";
  if (t == ValueType::F32 || t == ValueType::F64) return number_text(t, load_float(t, p));
  const Integer n = load_integer(t, p);
  return n.is_unsigned ? std::to_string(n.u) : std::to_string(n.i);
}

}  // namespace

std::string GgufFile::format_value(const Value& v, size_t max_elems) {
  switch (v.type) {
    case ValueType::BOOL: return v.b ? "true" : "false";
    case ValueType::STRING: return quoted(v.str);
    case ValueType::F32:
    case ValueType::F64: return number_text(v.type, v.f);
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64: return std::to_string(v.u);
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return std::to_string(v.i);
    case ValueType::ARRAY: break;
  }
  std::string out = "[";
  const uint64_t shown = v.count < max_elems ? v.count : max_elems;
  const size_t elem_size = detail::scalar_size(v.elem_type);
  for (uint64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    if (v.elem_type == ValueType::STRING) {
      out += i < v.strings.size() ? quoted(v.strings[i]) : "?";
    } else if (v.data != nullptr && elem_size != 0) {
      out += element_text(v.elem_type, v.data + i * elem_size);
    }
  }
  if (shown < v.count) out += shown > 0 ? ", ..." : "...";
  out += "]";
  if (shown < v.count) out += str_cat(" (", v.count, " ", value_type_name(v.elem_type), ")");
  return out;
}

const Value* GgufFile::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const Value& v,
                             std::string_view expected) {
  std::string actual(value_type_name(v.type));
  if (v.type == ValueType::ARRAY) actual = str_cat("array of ", value_type_name(v.elem_type));
  fail(path, ": key '", printable(key), "' has type ", actual, ", expected ", expected);
}

bool is_unsigned_type(ValueType t) {
  return t == ValueType::U8 || t == ValueType::U16 || t == ValueType::U32 || t == ValueType::U64;
}

bool fits_int64(const Integer& n) {
  return !n.is_unsigned || n.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

int64_t as_int64(const Integer& n) { return n.is_unsigned ? static_cast<int64_t>(n.u) : n.i; }

}  // namespace

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(path_, key, *v, "string");
  return v->str;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!detail::is_integer_type(v->type)) wrong_type(path_, key, *v, "an integer");
  const Integer n{is_unsigned_type(v->type), v->u, v->i};
  if (!fits_int64(n)) {
    fail(path_, ": key '", printable(key), "' value ", n.u, " does not fit in int64");
  }
  return as_int64(n);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == ValueType::F32 || v->type == ValueType::F64) return v->f;
  if (!detail::is_integer_type(v->type)) wrong_type(path_, key, *v, "a number");
  return is_unsigned_type(v->type) ? static_cast<double>(v->u) : static_cast<double>(v->i);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(path_, key, *v, "bool");
  return v->b;
}

std::optional<std::vector<std::string_view>> GgufFile::get_string_array(
    std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING) {
    wrong_type(path_, key, *v, "array of string");
  }
  return v->strings;
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const bool numeric = v->type == ValueType::ARRAY &&
                       (v->elem_type == ValueType::F32 || v->elem_type == ValueType::F64 ||
                        detail::is_integer_type(v->elem_type));
  if (!numeric) wrong_type(path_, key, *v, "array of numbers");
  const size_t elem_size = detail::scalar_size(v->elem_type);
  std::vector<float> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    out[i] = static_cast<float>(load_float(v->elem_type, v->data + i * elem_size));
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != ValueType::ARRAY || !detail::is_integer_type(v->elem_type)) {
    wrong_type(path_, key, *v, "array of integers");
  }
  const size_t elem_size = detail::scalar_size(v->elem_type);
  std::vector<int64_t> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    const Integer n = load_integer(v->elem_type, v->data + i * elem_size);
    if (!fits_int64(n)) {
      fail(path_, ": key '", printable(key), "' element ", i, " (", n.u,
           ") does not fit in int64");
    }
    out[i] = as_int64(n);
  }
  return out;
}

}  // namespace hearth::gguf
