// Neuron-sparse products for the FFN of a sparse decode step (DESIGN.md 2, 5): only the active
// neurons' rows of ffn_up / ffn_gate are read (gather_matmul), and the down projection adds only
// the active neurons' columns of ffn_down, read as rows of its neuron-major transpose
// (sparse_axpy). Weights are in ggml layout: W has `rows` rows of `cols` contiguous elements
// (ne0 = cols). idx lists the active rows (neurons), each in [0, rows), in any order (ascending
// reads memory best). Both split the work over the context's thread pool, never allocate after
// warm-up, and give results that do not depend on the number of threads. gather_matmul may
// quantize activations into ctx.scratch(), so a call invalidates scratch pointers the caller
// obtained earlier.
#pragma once

#include <cstdint>

#include "backend/cpu/context.h"
#include "core/dtype.h"

namespace hearth {

// Y[n, n_idx] = X[n, cols] · W[idx, cols]^T   (compact: column j of Y is neuron idx[j])
// Each output is bit-identical to the matching output of matmul over all of W.
void gather_matmul(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
                   const int32_t* idx, int64_t n_idx, const float* x, int64_t n, float* y);

// gather_matmul of two matrices of one type and shape over the same rows and input (ffn_up and
// ffn_gate): one activation quantization and one pass of the thread pool instead of two.
// Results are those of two gather_matmul calls, bit for bit.
void gather_matmul2(cpu::CpuContext& ctx, DType wtype, const void* w1, const void* w2, int64_t rows,
                    int64_t cols, const int32_t* idx, int64_t n_idx, const float* x, int64_t n,
                    float* y1, float* y2);

// Y[n, cols] = A[n, n_idx] · W_t[idx, cols]   (overwrites Y; A is compact, row stride n_idx)
// W_t is neuron-major: rows = n_ff neurons of cols = n_embd elements (ggml ne = {n_embd, n_ff}),
// the transpose of ffn_down. Each output element adds its terms in ascending j (FMA where the
// ISA has it), so results do not depend on the thread count. A neuron whose coefficients are
// zero for all n tokens is not read.
void sparse_axpy(cpu::CpuContext& ctx, DType wtype, const void* w_t, int64_t rows, int64_t cols,
                 const int32_t* idx, int64_t n_idx, const float* a, int64_t n, float* y);

// Y[t, cols] = A_t · W_t[idx_t] for n tokens, each with its own list: idx[t * ld, + counts[t]) and
// its coefficients a[t * ld, + counts[t]). Row t is sparse_axpy of that list alone (n = 1), bit for
// bit, whatever n and the thread count; the tokens share each chunk of rows while it is in cache.
void sparse_axpy_each(cpu::CpuContext& ctx, DType wtype, const void* w_t, int64_t rows,
                      int64_t cols, const int32_t* idx, const float* a, int64_t ld,
                      const int64_t* counts, int64_t n, float* y);

// y[cols] = W · x, for a float W [cols, rows] (ggml: rows elements per output row) and an input x
// [rows] that is zero except at inputs idx[0, n_idx) (ascending), where it is a: read from W_t
// [rows, cols], W's input-major copy (W's values, in W_t's float type), only the rows of those
// inputs. The bits are those of matvec (and matmul) of W over x, whatever the thread count: each
// output is summed as the dense kernels sum it (WeightKernels::dot_lanes), each lane's terms in
// order, a zero input's term being an exact zero the dense kernels add and this skips. So a
// token's product is the same through either matrix, and a batch may take whichever is faster.
// W_t's rows are in input order, or lane-grouped (lane_grouped_row).
void lane_matvec(cpu::CpuContext& ctx, DType wtype, DType wtype_t, const void* w_t, int64_t rows,
                 int64_t cols, const int32_t* idx, int64_t n_idx, const float* a, float* y,
                 bool lane_grouped);

// Y[n, cols] = X[n, rows] · W^T for a float W [cols, rows] read from its input-major copy W_t
// [rows, cols] (in input order, or lane-grouped; rows ldw bytes apart, 0: cols elements): every
// input of every token, each output summed as lane_matvec sums it, so row t is the bits of matvec
// of W over x_t (and of lane_matvec over x_t's non-zero inputs: a zero input adds an exact zero),
// whatever n and the thread count.
void lane_matmul(cpu::CpuContext& ctx, DType wtype, DType wtype_t, const void* w_t, int64_t rows,
                 int64_t cols, const float* x, int64_t n, float* y, bool lane_grouped,
                 size_t ldw = 0);

// The lane-grouped order of an input-major copy's rows: the inputs i with i % kLaneGroups = 0 in
// ascending order, then those with 1, and so on. lane_matvec sums each of a dot product's lanes
// (inputs i = l mod L, L dividing kLaneGroups) as one run of rows, so in this order a lane's rows
// lie in one (L = 16) or two (L = 8) contiguous stretches of the copy, which it reads nearly as a
// stream, where in input order its rows lie L rows apart. Returns the row of input i in a copy of
// `rows` inputs.
inline constexpr int64_t kLaneGroups = 16;
inline int64_t lane_grouped_row(int64_t i, int64_t rows) {
  const int64_t g = i % kLaneGroups, per = rows / kLaneGroups, extra = rows % kLaneGroups;
  return g * per + (g < extra ? g : extra) + i / kLaneGroups;
}

// x[0..n)'s non-zero elements as a list: their positions, ascending (or map[j] for position j
// where map is given), into idx and their values into a; returns how many. idx and a need room
// for n entries (every element is written at the next place, without a branch, and kept by
// moving past it: at the densities of sparse steps a branch on zero mispredicts on a large share
// of elements).
int64_t compact_row(const float* x, int64_t n, const int32_t* map, int32_t* idx, float* a);

// Each row of x[n, cols] as the list of its non-zero elements: their columns, ascending, into
// idx[t * cols, + counts[t]) and their values into a[t * cols, ...]. Returns how many columns are
// non-zero in some row. With sparse_axpy_each over an input-major copy of W, this makes each
// row's x · W^T read only the rows of its own non-zero inputs, the bits it gets alone.
int64_t compact_rows(const float* x, int64_t n, int64_t cols, int32_t* idx, float* a,
                     int64_t* counts);

}  // namespace hearth
