#include "ops/sparse_matmul.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/generic/generic_kernels.h"
#include "core/error.h"
#include "ops/matmul_common.h"
#include "ops/sparse_axpy_chunks.h"

namespace hearth {
namespace axpy_detail {

using matmul_detail::check_shape;

// Shapes as matmul checks them, plus the index list: an index outside W would read outside the
// mapping, and one pass over the list costs far less than the rows it selects, so it is checked
// on every call.
void check_args(const char* op, DType wtype, int64_t rows, int64_t cols, const int32_t* idx,
                int64_t n_idx, int64_t n) {
  check_shape(op, wtype, rows, cols, n);
  if (n_idx < 0) fail(op, ": negative index count ", n_idx);
  int32_t lo = 0, hi = 0;
  if (n_idx > 0) lo = hi = idx[0];
  for (int64_t j = 1; j < n_idx; ++j) {
    lo = std::min(lo, idx[j]);
    hi = std::max(hi, idx[j]);
  }
  if (n_idx > 0 && (lo < 0 || hi >= rows)) {
    fail(op, ": neuron index ", lo < 0 ? lo : hi, " outside [0, ", rows, ")");
  }
}

}  // namespace axpy_detail

namespace {

using axpy_detail::check_args;
using matmul_detail::threads_for;

// Y1 (and Y2 when w2 is given) [n, n_idx] = X · W[idx]^T: the gathered rows of w1, then those of
// w2, as one stacked product, so a thread's range may span both.
void gather(const char* op, cpu::CpuContext& ctx, DType wtype, const void* w1, const void* w2,
            int64_t rows, int64_t cols, const int32_t* idx, int64_t n_idx, const float* x,
            int64_t n, float* y1, float* y2) {
  check_args(op, wtype, rows, cols, idx, n_idx, n);
  if (n_idx == 0 || n == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  size_t ldx = 0;
  const uint8_t* xa = matmul_detail::prepare_activations(ctx, k, x, cols, n, &ldx);
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const MatmulPart parts[] = {{w1, n_idx, y1}, {w2, n_idx, y2}};
  const std::span<const MatmulPart> used(parts, w2 ? 2 : 1);
  // The index list splits like the rows of a dense product: equal contiguous parts, so the
  // work (rows actually read) is balanced whatever the density.
  matmul_detail::run_split(
      ctx, static_cast<int64_t>(used.size()) * n_idx, n, ldw, ldx,
      [&](int64_t r0, int64_t r1, int64_t t0, int64_t tn) {
        matmul_detail::for_each_piece(used, r0, r1, [&](const MatmulPart& p, int64_t b, int64_t e) {
          k.gemm_gather(cols, p.w, ldw, idx + b, e - b, xa + t0 * ldx, ldx, tn,
                        p.y + t0 * n_idx + b, static_cast<size_t>(n_idx));
        });
      });
}

}  // namespace

void gather_matmul(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
                   const int32_t* idx, int64_t n_idx, const float* x, int64_t n, float* y) {
  gather("gather_matmul", ctx, wtype, w, nullptr, rows, cols, idx, n_idx, x, n, y, nullptr);
}

void gather_matmul2(cpu::CpuContext& ctx, DType wtype, const void* w1, const void* w2, int64_t rows,
                    int64_t cols, const int32_t* idx, int64_t n_idx, const float* x, int64_t n,
                    float* y1, float* y2) {
  gather("gather_matmul2", ctx, wtype, w1, w2, rows, cols, idx, n_idx, x, n, y1, y2);
}

namespace axpy_detail {

// One-token axpy in chunks of the active list: a thread streams whole rows (the column split
// below has two threads read halves of the same short rows, which the memory system serves well
// below a matvec's bandwidth), each chunk into its own partial sum, then the partials are
// added in chunk order. The chunking depends only on the token's list and W's rows, never on
// the thread count, so the result is the same bits for any thread count. Two ways to cut:
// - By position: chunks hold whole groups of the Q4_0 kernel's coefficients (32 non-zero
//   coefficients, the rows actually read), so the groups are those of one pass over the whole
//   list, and their group counts differ by at most one, so a thread's contiguous share of them is
//   within a group of its due.
// - By row: float rows (no coefficient groups) with an ascending list over at least a
//   half of W's rows end chunk c at row floor((c + 1) rows / chunks). Every chunk count
//   divides kMaxChunks, so every such token's chunks are unions of the same kMaxChunks row
//   ranges, and sparse_axpy_each sums many tokens' chunks of one range as one product
//   (sparse_axpy_each.cc). Such lists spread over all of W, so equal row ranges cost about the
//   same.
namespace {
constexpr int64_t kMinChunkRows = 2 * cpu::generic::kAxpyGroup;
// Chunk counts that split evenly over 1, 2, 3, 4, 6, 8 and 12 threads where they can.
constexpr int64_t kChunkCounts[] = {24, 12, 8, 6, 4, 2};
static_assert(kChunkCounts[0] == kMaxChunks);

bool cut_by_row(DType wtype, const int32_t* idx, int64_t n_idx, int64_t nnz, int64_t rows) {
  if (dtype_block_size(wtype) != 1 || 2 * nnz < rows) return false;
  for (int64_t j = 1; j < n_idx; ++j) {
    if (idx[j] <= idx[j - 1]) return false;
  }
  return true;
}

}  // namespace

int64_t grid_row(int64_t range, int64_t rows) { return range * rows / kMaxChunks; }

int64_t axpy_chunks(DType wtype, const int32_t* idx, const float* a, int64_t n_idx, int64_t rows,
                    int64_t* bounds, bool* by_row) {
  int64_t nnz = 0;
  for (int64_t j = 0; j < n_idx; ++j) nnz += a[j] != 0.0f ? 1 : 0;
  const bool grid = cut_by_row(wtype, idx, n_idx, nnz, rows);
  if (by_row) *by_row = grid;
  int64_t chunks = 1;
  for (const int64_t c : kChunkCounts) {
    if (nnz >= c * kMinChunkRows) {
      chunks = c;
      break;
    }
  }
  if (chunks == 1) return 1;
  bounds[0] = 0;
  bounds[chunks] = n_idx;
  if (grid) {
    for (int64_t c = 1; c < chunks; ++c) {
      const auto row = static_cast<int32_t>(grid_row(c * (kMaxChunks / chunks), rows));
      bounds[c] = std::lower_bound(idx, idx + n_idx, row) - idx;
    }
    return chunks;
  }
  // Chunk c ends after floor((c + 1) * groups / chunks) groups. (Equal chunks of whole groups
  // instead, rounded up, left 96, 96 and 90 rows at 95% sparsity: 2:1 over two threads.) With
  // nnz >= chunks * kMinChunkRows every chunk gets at least two groups.
  constexpr int64_t g = cpu::generic::kAxpyGroup;
  const int64_t groups = (nnz + g - 1) / g;
  int64_t c = 1, seen = 0;
  // The position (in non-zero coefficients) where chunk c starts, updated once per chunk: a
  // division per coefficient cost more than the search itself.
  int64_t start = groups / chunks * g;
  for (int64_t j = 0; j < n_idx && c < chunks; ++j) {
    if (a[j] == 0.0f) continue;
    if (seen == start) {
      bounds[c++] = j;
      start = c * groups / chunks * g;
    }
    ++seen;
  }
  return chunks;
}

// part[c - c0] = the axpy over chunk c's positions of the list, for chunks [c0, c1).
void axpy_into_parts(const cpu::WeightKernels& k, const uint8_t* wb, size_t ldw, int64_t cols,
                     const int32_t* idx, int64_t n_idx, const float* a, const int64_t* bounds,
                     int64_t c0, int64_t c1, float* part) {
  std::memset(part, 0, static_cast<size_t>((c1 - c0) * cols) * sizeof(float));
  if (k.axpy_parts) {
    // A thread's chunks in one call, so the kernel's read-ahead does not restart cold at each
    // chunk.
    const int64_t j0 = bounds[c0];
    int64_t ends[kMaxChunks];
    for (int64_t c = c0; c < c1; ++c) ends[c - c0] = bounds[c + 1] - j0;
    k.axpy_parts(cols, wb, ldw, idx + j0, a + j0, ends, c1 - c0, part, static_cast<size_t>(cols));
    return;
  }
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t b = bounds[c], e = bounds[c + 1];
    k.axpy(cols, wb, ldw, idx + b, e - b, a + b, static_cast<size_t>(n_idx), 1,
           part + (c - c0) * cols, static_cast<size_t>(cols));
  }
}

}  // namespace axpy_detail

namespace {

using axpy_detail::axpy_chunks;
using axpy_detail::axpy_into_parts;
using axpy_detail::kMaxChunks;

// y[cols] (+)= part[c0] + ... + part[c1 - 1], one column block at a time in registers, each
// column summed in chunk order (the first chunk of all overwrites y).
void add_parts(const float* part, int64_t c0, int64_t c1, int64_t cols, float* y) {
  constexpr int64_t kCols = 64;
  for (int64_t b = 0; b < cols; b += kCols) {
    const int64_t w = std::min(kCols, cols - b);
    float acc[kCols];
    const float* first = part + c0 * cols + b;
    if (c0 == 0) {
      std::copy(first, first + w, acc);
    } else {
      for (int64_t i = 0; i < w; ++i) acc[i] = y[b + i] + first[i];
    }
    for (int64_t c = c0 + 1; c < c1; ++c) {
      const float* pc = part + c * cols + b;
      for (int64_t i = 0; i < w; ++i) acc[i] += pc[i];
    }
    std::copy(acc, acc + w, y + b);
  }
}

// Splits the chunks into nth contiguous ranges of about equal cost; thread t takes chunks
// [first[t], first[t + 1]). A row read right after the row before it costs less than a scattered
// one (the hardware prefetchers follow it, and it shares DRAM pages), so equal chunk counts would
// give the thread with the hot, dense-packed head of a hot-first model far less to wait for than
// the one with the scattered tail. Any contiguous split gives the same bits: the partials are
// added in chunk order whoever computes them.
void balance_chunks(const int32_t* idx, const float* a, const int64_t* bounds, int64_t chunks,
                    int nth, int64_t* first) {
  constexpr int64_t kFollowing = 2, kScattered = 3;  // relative costs of a row
  int64_t cost[kMaxChunks];
  int64_t total = 0;
  int32_t prev = -2;
  for (int64_t c = 0; c < chunks; ++c) {
    cost[c] = 0;
    for (int64_t j = bounds[c]; j < bounds[c + 1]; ++j) {
      if (a[j] == 0.0f) continue;
      cost[c] += idx[j] == prev + 1 ? kFollowing : kScattered;
      prev = idx[j];
    }
    total += cost[c];
  }
  // Chunk c goes to the thread whose share holds the middle of its cost.
  first[0] = 0;
  int t = 1;
  int64_t before = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    while (t < nth && 2 * before + cost[c] > 2 * total * t / nth) first[t++] = c;
    before += cost[c];
  }
  for (; t <= nth; ++t) first[t] = chunks;
}

void axpy_chunked(cpu::CpuContext& ctx, const cpu::WeightKernels& k, const uint8_t* wb, size_t ldw,
                  int64_t cols, const int32_t* idx, int64_t n_idx, const float* a, int64_t chunks,
                  const int64_t* bounds, float* y) {
  // [kMaxChunks, cols], always the largest size, so the arena grows once, on the first token.
  auto* part =
      static_cast<float*>(ctx.scratch(static_cast<size_t>(kMaxChunks * cols) * sizeof(float)));
  cpu::Turns turns;
  // The partials are added in chunk order, each thread adding its own (still in its cache) to y
  // in thread order, so only y moves between cores and a thread that finished early adds its
  // share while the others still compute. (A second pass of the pool summing columns of all
  // partials instead would read half of them across cores.)
  constexpr int kMaxThreads = 256;
  const int nth = std::min(ctx.n_threads(), kMaxThreads);
  int64_t first[kMaxThreads + 1];
  balance_chunks(idx, a, bounds, chunks, nth, first);
  ctx.pool().run([&](int ith, int) {
    const int64_t c0 = ith < nth ? first[ith] : chunks, c1 = ith < nth ? first[ith + 1] : chunks;
    if (c1 > c0) {
      axpy_into_parts(k, wb, ldw, cols, idx, n_idx, a, bounds, c0, c1, part + c0 * cols);
    }
    turns.wait(ith);
    if (c1 > c0) add_parts(part, c0, c1, cols, y);
    turns.done(ith);
  });
}

}  // namespace

void sparse_axpy(cpu::CpuContext& ctx, DType wtype, const void* w_t, int64_t rows, int64_t cols,
                 const int32_t* idx, int64_t n_idx, const float* a, int64_t n, float* y) {
  check_args("sparse_axpy", wtype, rows, cols, idx, n_idx, n);
  if (cols == 0 || n == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const auto* wb = static_cast<const uint8_t*>(w_t);
  if (n == 1) {
    int64_t bounds[kMaxChunks + 1];
    if (const int64_t chunks = axpy_chunks(wtype, idx, a, n_idx, rows, bounds); chunks > 1) {
      return axpy_chunked(ctx, k, wb, ldw, cols, idx, n_idx, a, chunks, bounds, y);
    }
  }
  // Threads own disjoint output columns, in whole blocks of 32 or of the type's own (so a
  // quantized row slice starts at a block), and each sums its elements alone in ascending j: no
  // merge, no race, and the same bits for any thread count. Several tokens reuse each decoded
  // weight vector, which hides the shorter streams.
  const int64_t block = std::max(kQK, dtype_block_size(wtype));
  const int64_t chunks = (cols + block - 1) / block;
  const int used = std::min<int>(threads_for(ctx, n_idx * static_cast<int64_t>(ldw)),
                                 static_cast<int>(std::min<int64_t>(chunks, ctx.n_threads())));
  auto task = [&](int ith, int) {
    if (ith >= used) return;
    const auto [ch0, ch1] = cpu::split_range(chunks, ith, used);
    const int64_t c0 = ch0 * block, c1 = std::min(ch1 * block, cols);
    if (c1 <= c0) return;
    for (int64_t t = 0; t < n; ++t) {
      std::memset(y + t * cols + c0, 0, static_cast<size_t>(c1 - c0) * sizeof(float));
    }
    k.axpy(c1 - c0, wb + row_bytes(wtype, c0), ldw, idx, n_idx, a, static_cast<size_t>(n_idx), n,
           y + c0, static_cast<size_t>(cols));
  };
  if (used == 1) {
    task(0, 1);
  } else {
    ctx.pool().run(task);
  }
}

}  // namespace hearth
