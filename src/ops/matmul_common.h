// What the dense (matmul.cc) and the row-gathered (sparse_matmul.cc) products share: shape
// checks, how many threads a product is worth, activations in the kernels' format, and the split
// of an [n tokens x rows] output over the thread pool. Internal to src/ops.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>

#include "backend/cpu/context.h"
#include "core/dtype.h"
#include "ops/matmul.h"

namespace hearth::matmul_detail {

// The activation bytes of one token block. Every weight of a thread's row range is read from
// DRAM once per token block, so blocks are large: a block that fits L2 (a few hundred KiB) left
// prompts over long float rows (an FFN down projection's 5632 F32 columns: 16 tokens a block)
// waiting on weights, while activations streamed from L3 keep up with the tiles.
inline constexpr size_t kActBlockBytes = 1536 * 1024;
// One token (decode) splits its rows into one contiguous range per thread, which the thread
// reads front to back in chunks of about kStealChunkBytes of weights: one forward stream, as the
// tiles want. A thread that finishes its range early takes the remaining chunks of the others
// from their far end, so a core that falls behind (shared with another tenant, or further from
// its rows) does not keep the rest waiting. Which thread computes a row changes no output bit.
inline constexpr size_t kStealChunkBytes = 64 * 1024;
// A kernel that reads S streams (WeightKernels::gemv_streams) gets chunks of up to S *
// kStreamPartBytes, so that each stream runs for a while (parts of 16 KiB lose most of what
// streams gain, docs/benchmarks.md), yet at least kMinChunksPerThread per thread where the
// product is smaller, so that a core that falls behind still sheds work.
inline constexpr size_t kStreamPartBytes = 256 * 1024;
inline constexpr int64_t kMinChunksPerThread = 4;
// Chunks are whole numbers of the largest one-token tiles (8 rows: float gathers)
// and at least two of them, so a chunk boundary never cuts a product into smaller tiles.
inline constexpr int64_t kRowQuantum = 8;

// Token blocks are a multiple of the tile kernels' token count so only the last block has an
// edge tile.
inline constexpr int64_t kTokenQuantum = 4;

// Throws hearth::Error (naming `op`) for a negative size or a column count that is not a
// multiple of the weight type's block size.
void check_shape(const char* op, DType wtype, int64_t rows, int64_t cols, int64_t n);

// Threads worth waking for a product that reads `weight_bytes` (at least 1, at most the pool):
// below 32 KiB per thread, waking workers costs more than it saves.
int threads_for(const cpu::CpuContext& ctx, int64_t weight_bytes);

// X[n, cols] in k's activation format, rows *ldx bytes apart: x itself for F32, otherwise the
// rows quantized once into ctx.scratch() (on the calling thread for one row, by the pool for
// more), shared by every thread.
const uint8_t* prepare_activations(cpu::CpuContext& ctx, const cpu::WeightKernels& k,
                                   const float* x, int64_t cols, int64_t n, size_t* ldx);

// Runs gemm(r0, r1, t0, tn), which computes output rows [r0, r1) for tokens [t0, t0 + tn), over
// the whole [rows x n] output. One token (decode) splits rows over as many threads as the
// `row_bytes` per row are worth. More tokens use every thread: each owns a disjoint row range
// (each weight byte is read by one core) unless there are too few rows to go round, as in small
// attention-sized products; then they own tokens. Tokens go in blocks of kActBlockBytes of
// activations. Every output is computed by one call of the same kernel whatever the split, so
// results do not depend on the thread count.
// `quantum`: decode's chunks are whole multiples of it (kRowQuantum rows; 1 where a "row" is a
// group of rows already). `streams`: the kernel's gemv_streams.
template <typename Gemm>
void run_split(cpu::CpuContext& ctx, int64_t rows, int64_t n, size_t row_bytes, size_t ldx,
               const Gemm& gemm, int64_t quantum = kRowQuantum, int streams = 1) {
  if (rows == 0 || n == 0) return;
  if (n == 1) {
    const int64_t total = rows * static_cast<int64_t>(row_bytes);
    const int used = threads_for(ctx, total);
    if (used == 1) {
      gemm(int64_t{0}, rows, int64_t{0}, int64_t{1});
      return;
    }
    const size_t chunk_bytes =
        streams <= 1
            ? kStealChunkBytes
            : std::clamp(static_cast<size_t>(total / (kMinChunksPerThread * used)),
                         kStealChunkBytes, static_cast<size_t>(streams) * kStreamPartBytes);
    const int64_t chunk_rows = static_cast<int64_t>(chunk_bytes / row_bytes);
    const int64_t chunk = std::max(2 * quantum, chunk_rows / quantum * quantum);
    const int64_t n_chunks = (rows + chunk - 1) / chunk;
    cpu::ChunkRange* const ranges = ctx.pool().chunk_ranges();
    for (int i = 0; i < used; ++i) {
      const auto [c0, c1] = cpu::split_range(n_chunks, i, used);
      ranges[i].reset(c0, c1);
    }
    const auto run_chunk = [&](int64_t c) {
      gemm(c * chunk, std::min(rows, (c + 1) * chunk), int64_t{0}, int64_t{1});
    };
    ctx.pool().run([&](int ith, int) {
      if (ith >= used) return;
      for (int64_t c; (c = ranges[ith].take_front()) >= 0;) run_chunk(c);
      for (int v = 1; v < used; ++v) {
        cpu::ChunkRange& other = ranges[(ith + v) % used];
        for (int64_t c; (c = other.take_back()) >= 0;) run_chunk(c);
      }
    });
    return;
  }
  const int64_t block = std::max<int64_t>(
      kTokenQuantum, static_cast<int64_t>(kActBlockBytes / ldx) / kTokenQuantum * kTokenQuantum);
  const bool split_rows = rows >= 16 * static_cast<int64_t>(ctx.n_threads());
  auto task = [&](int ith, int nt) {
    int64_t r0 = 0, r1 = rows, t_begin = 0, t_end = n;
    if (split_rows) {
      std::tie(r0, r1) = cpu::split_range(rows, ith, nt);
    } else {
      std::tie(t_begin, t_end) = cpu::split_range(n, ith, nt);
    }
    if (r1 <= r0) return;
    for (int64_t t0 = t_begin; t0 < t_end; t0 += block) {
      gemm(r0, r1, t0, std::min(block, t_end - t0));
    }
  };
  ctx.pool().run(task);
}

// Rows [r0, r1) of a matrix stacked from `parts` (in order): piece(part, b, e) for every part
// they meet, [b, e) being the rows inside that part. How run_split's row ranges reach products
// made of several matrices (matmul_parts; gather_matmul2's up and gate).
template <typename Piece>
void for_each_piece(std::span<const MatmulPart> parts, int64_t r0, int64_t r1,
                    const Piece& piece) {
  int64_t first = 0;  // the part's first row in the stacked matrix
  for (const MatmulPart& p : parts) {
    const int64_t b = std::max(r0, first) - first, e = std::min(r1, first + p.rows) - first;
    if (b < e) piece(p, b, e);
    first += p.rows;
  }
}

}  // namespace hearth::matmul_detail
