// What sparse_axpy (sparse_matmul.cc) and sparse_axpy_each (sparse_axpy_each.cc) share: the
// argument checks and the one-token chunking, whose partial sums fix a token's bits. Internal to
// ops/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/dispatch.h"
#include "core/dtype.h"

namespace hearth::axpy_detail {

// The most chunks one token's list is cut into.
inline constexpr int64_t kMaxChunks = 24;

// Fails unless W's shape is valid and every index lies in [0, rows).
void check_args(const char* op, DType wtype, int64_t rows, int64_t cols, const int32_t* idx,
                int64_t n_idx, int64_t n);

// One token's chunks of its list (idx, a)[0, n_idx) over W's `rows` rows: fills
// bounds[0..chunks] (positions in the list) and returns the number of chunks (1: do not chunk),
// which divides kMaxChunks. It depends only on the list, W's type and rows, never on the thread
// count. Float rows with an ascending list whose non-zero coefficients cover at least half of W's
// rows are cut by row (*by_row, when given, says so): chunk c then ends at row
// grid_row((c + 1) * kMaxChunks / chunks, rows), whatever the chunk count.
int64_t axpy_chunks(DType wtype, const int32_t* idx, const float* a, int64_t n_idx, int64_t rows,
                    int64_t* bounds, bool* by_row = nullptr);

// The first row of range `range` of the kMaxChunks equal row ranges of W (range kMaxChunks: rows).
int64_t grid_row(int64_t range, int64_t rows);

// part[c - c0] (cols each, overwritten) = the one-token axpy over chunk c's positions of the
// list, for chunks [c0, c1).
void axpy_into_parts(const cpu::WeightKernels& k, const uint8_t* wb, size_t ldw, int64_t cols,
                     const int32_t* idx, int64_t n_idx, const float* a, const int64_t* bounds,
                     int64_t c0, int64_t c1, float* part);

}  // namespace hearth::axpy_detail
