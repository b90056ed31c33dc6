// A view of a weight matrix in ggml layout, shared by the model (which finds matrices in the
// file) and the ops (which take them as arguments). Owns nothing.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hearth {

// `rows` rows of `cols` contiguous elements (GGUF ne = {cols, rows}); data == nullptr: absent.
struct Matrix {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  bool present() const { return data != nullptr; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(type, cols); }
  size_t stride() const { return static_cast<size_t>(row_bytes(type, cols)); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes(type, cols);
  }
  // Rows [first, first + n) as a matrix of their own (a view into the same data).
  Matrix rows_range(int64_t first, int64_t n) const { return Matrix{type, row(first), n, cols}; }
};

}  // namespace hearth
