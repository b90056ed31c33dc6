// lane_matvec (sparse_matmul.h): a float product through an input-major copy that reproduces the
// dense kernels' sums. A dense dot product of W's row o with x keeps L lanes, lane l adding
// w[o][i] x[i] for i = l (mod L) in ascending i, then folds the lanes in halves. Here lane l is
// a row [cols] of partial sums over the inputs of that lane: the one-token axpy (FMA in ascending
// order, or the scalar table's multiply-then-add, as that table's dot does) adds each listed
// input's row of W_t into it, and a final pass folds the L rows as the dot product folds its
// lanes. Threads take whole lanes (disjoint rows of W_t: no shared writes, no order to keep),
// each thread's lanes in one axpy_parts walk: with a power-of-two count of threads, the lanes
// congruent to the thread's index, which it folds itself as far as the fold keeps to them; else
// runs of lanes with about equal numbers of inputs.
// lane_matmul: the same sums for every input of a batch, as a matrix product: per chunk of
// output columns and tile of tokens, each lane's rows of W_t against every token (axpy_dense),
// then the fold. Threads take runs of chunks.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/matmul_common.h"
#include "ops/sparse_axpy_chunks.h"
#include "ops/sparse_matmul.h"

namespace hearth {
namespace {

constexpr int kMaxLanes = 64;
// lane_matmul's tiles: kChunk output columns, whose rows of a lane stay in L1 across the token
// tiles of axpy_dense, and kTokens tokens, whose partial sums for every lane stay in L2. Up to
// kFewTokens tokens (one register tile: no rows to reuse across tiles) a thread takes its columns
// in one chunk instead, so that it reads long runs of each row rather than kChunk columns of
// every row per pass.
constexpr int64_t kChunk = 128, kTokens = 192, kFewTokens = 12;

size_t round_up64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The lanes' partial sums, lane l's `count` values at sums + l * stride, folded in halves as the
// dense dot product folds its lanes (lane l += lane l + width), into lane 0's.
void fold_lanes(float* sums, int lanes, int64_t stride, int64_t count) {
  for (int width = lanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) {
      float* const dst = sums + l * stride;
      const float* const src = sums + (l + width) * stride;
      for (int64_t c = 0; c < count; ++c) dst[c] += src[c];
    }
  }
}

// Whether a weight type's dot product keeps `lanes` lanes that the input-major forms can
// reproduce: a power of two (folded in halves; a lane is then a mask), dividing the copy's lane
// groups where its rows are lane-grouped.
void check_lanes(const char* op, int lanes, DType wtype, DType wtype_t, bool copy_float,
                 bool lane_grouped) {
  if (lanes <= 0 || lanes > kMaxLanes || (lanes & (lanes - 1)) != 0 || !copy_float) {
    fail(op, ": ", dtype_name(wtype), " to ", dtype_name(wtype_t), " is not float to float");
  }
  if (lane_grouped && kLaneGroups % lanes != 0) {
    fail(op, ": ", lanes, " lanes do not divide the copy's ", kLaneGroups, " lane groups");
  }
}

}  // namespace

void lane_matvec(cpu::CpuContext& ctx, DType wtype, DType wtype_t, const void* w_t, int64_t rows,
                 int64_t cols, const int32_t* idx, int64_t n_idx, const float* a, float* y,
                 bool lane_grouped) {
  axpy_detail::check_args("lane_matvec", wtype_t, rows, cols, idx, n_idx, 1);
  const int lanes = ctx.kernels().weights(wtype).dot_lanes;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype_t);
  check_lanes("lane_matvec", lanes, wtype, wtype_t, k.dot_lanes > 0 && k.axpy_parts, lane_grouped);
  if (cols == 0) return;
  const auto ldw = static_cast<size_t>(row_bytes(wtype_t, cols));
  // With a power-of-two count of threads, at most `lanes`, thread t takes the lanes l = t (mod
  // threads): the fold's first levels (lane l += lane l + width, for width >= threads) then pair
  // lanes of one thread, which each thread folds in its own cache, and only its last levels join
  // one row per thread. Otherwise threads take runs of lanes and the last one folds them all.
  const int pool = ctx.pool().size();
  const int groups = pool > 1 && pool <= lanes && (pool & (pool - 1)) == 0 ? pool : 1;
  const int per_group = lanes / groups;
  const bool own_folds = groups > 1;
  // What the last thread folds: one row per group (group g's first position), or every lane.
  const int last_rows = own_folds ? groups : lanes;
  const int64_t last_stride = own_folds ? per_group * cols : cols;
  // Lane l's position in the threads' order: group l % groups, then l / groups (a table: the
  // list's every input looks its lane's position up twice).
  int32_t position[kMaxLanes];
  for (int l = 0; l < lanes; ++l) position[l] = (l % groups) * per_group + l / groups;
  // Scratch: the lanes' partial sums [lanes, cols] by position, then the list sorted by position
  // (stable, so each lane's inputs stay ascending) and each position's start [lanes + 1].
  const size_t acc_bytes = round_up64(static_cast<size_t>(lanes * cols) * sizeof(float));
  const size_t list_bytes = round_up64(static_cast<size_t>(n_idx) * sizeof(int32_t));
  const size_t coef_bytes = round_up64(static_cast<size_t>(n_idx) * sizeof(float));
  auto* arena = static_cast<uint8_t*>(ctx.scratch(
      acc_bytes + list_bytes + coef_bytes + static_cast<size_t>(lanes + 1) * sizeof(int64_t)));
  auto* acc = reinterpret_cast<float*>(arena);
  auto* by_lane = reinterpret_cast<int32_t*>(arena + acc_bytes);
  auto* coef = reinterpret_cast<float*>(arena + acc_bytes + list_bytes);
  auto* start = reinterpret_cast<int64_t*>(arena + acc_bytes + list_bytes + coef_bytes);
  const int32_t lane_mask = lanes - 1;
  std::fill(start, start + lanes + 1, 0);
  for (int64_t j = 0; j < n_idx; ++j) {
    if (j > 0 && idx[j] <= idx[j - 1]) fail("lane_matvec: inputs not in ascending order");
    ++start[position[idx[j] & lane_mask] + 1];
  }
  for (int q = 0; q < lanes; ++q) start[q + 1] += start[q];
  int64_t next[kMaxLanes];
  std::copy(start, start + lanes, next);
  for (int64_t j = 0; j < n_idx; ++j) {
    const int64_t at = next[position[idx[j] & lane_mask]]++;
    by_lane[at] = lane_grouped ? static_cast<int32_t>(lane_grouped_row(idx[j], rows)) : idx[j];
    coef[at] = a[j];
  }
  const auto* wb = static_cast<const uint8_t*>(w_t);
  // Runs of lanes holding about equal shares of the inputs: position q's run of by_lane starts at
  // start[q], so thread i's first position is the boundary nearest i / nth of them.
  const auto first_position = [&](int i, int nth) {
    if (own_folds) return i * per_group;
    const int64_t goal = n_idx * i / nth;
    const int64_t* at = std::lower_bound(start, start + lanes, goal);
    if (at > start && goal - at[-1] < *at - goal) --at;
    return i == nth ? lanes : static_cast<int>(at - start);
  };
  // The last thread folds what is left once every thread has added (and folded) its own (a
  // second pass of the pool costs more than the fold).
  cpu::Turns turns;
  ctx.pool().run([&](int ith, int nth) {
    const int q0 = first_position(ith, nth), q1 = first_position(ith + 1, nth);
    float* const mine = acc + q0 * cols;
    if (q0 < q1) {
      std::memset(mine, 0, static_cast<size_t>((q1 - q0) * cols) * sizeof(float));
      // The thread's lanes in one walk, which reads ahead across their boundaries.
      int64_t ends[kMaxLanes];
      for (int q = q0; q < q1; ++q) ends[q - q0] = start[q + 1] - start[q0];
      k.axpy_parts(cols, wb, ldw, by_lane + start[q0], coef + start[q0], ends, q1 - q0, mine,
                   static_cast<size_t>(cols));
      if (own_folds) fold_lanes(mine, per_group, cols, cols);
    }
    turns.wait(ith);
    turns.done(ith);
    if (ith != nth - 1) return;
    fold_lanes(acc, last_rows, last_stride, cols);
    std::copy(acc, acc + cols, y);
  });
}

void lane_matmul(cpu::CpuContext& ctx, DType wtype, DType wtype_t, const void* w_t, int64_t rows,
                 int64_t cols, const float* x, int64_t n, float* y, bool lane_grouped, size_t ldw) {
  matmul_detail::check_shape("lane_matmul", wtype_t, rows, cols, n);
  const int lanes = ctx.kernels().weights(wtype).dot_lanes;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype_t);
  check_lanes("lane_matmul", lanes, wtype, wtype_t, k.dot_lanes > 0 && k.axpy_dense, lane_grouped);
  if (cols == 0 || n == 0) return;
  if (ldw == 0) ldw = static_cast<size_t>(row_bytes(wtype_t, cols));
  const auto elem = static_cast<size_t>(row_bytes(wtype_t, 1));
  const auto nth = static_cast<size_t>(ctx.pool().size());
  const int64_t per_thread = (cols + static_cast<int64_t>(nth) - 1) / static_cast<int64_t>(nth);
  const int64_t chunk = n <= kFewTokens ? std::max(kChunk, (per_thread + 31) / 32 * 32) : kChunk;
  const int64_t tile = std::min(n, kTokens);
  // Scratch: each thread's lanes' partial sums [lanes, tile, chunk], then the copy's rows by
  // lane [rows] (lane l's inputs i = l (mod lanes), ascending, from start[l]), the lanes' starts
  // [lanes + 1] and the coefficients [rows, n] in the same order, token-fastest.
  const int64_t part = lanes * tile * chunk;
  const size_t part_bytes = round_up64(static_cast<size_t>(part) * sizeof(float));
  const size_t rows_bytes = round_up64(static_cast<size_t>(rows) * sizeof(int32_t));
  const size_t start_bytes = round_up64(static_cast<size_t>(lanes + 1) * sizeof(int64_t));
  auto* arena = static_cast<uint8_t*>(ctx.scratch(part_bytes * nth + rows_bytes + start_bytes +
                                                  static_cast<size_t>(rows * n) * sizeof(float)));
  uint8_t* const shared = arena + part_bytes * nth;
  auto* by_lane = reinterpret_cast<int32_t*>(shared);
  auto* start = reinterpret_cast<int64_t*>(shared + rows_bytes);
  auto* coef = reinterpret_cast<float*>(shared + rows_bytes + start_bytes);
  start[0] = 0;
  for (int l = 0; l < lanes; ++l) start[l + 1] = start[l] + (rows - l + lanes - 1) / lanes;
  // Threads pack runs of inputs, a few tokens at a time, so the reads of x stay in a few rows.
  ctx.pool().run([&](int ith, int nth_run) {
    const auto [i0, i1] = cpu::split_range(rows, ith, nth_run);
    for (int64_t i = i0; i < i1; ++i) {
      by_lane[start[i & (lanes - 1)] + i / lanes] =
          static_cast<int32_t>(lane_grouped ? lane_grouped_row(i, rows) : i);
    }
    constexpr int64_t kPackTokens = 8;
    for (int64_t t0 = 0; t0 < n; t0 += kPackTokens) {
      const int64_t t1 = std::min(n, t0 + kPackTokens);
      for (int64_t i = i0; i < i1; ++i) {
        float* const to = coef + (start[i & (lanes - 1)] + i / lanes) * n;
        for (int64_t t = t0; t < t1; ++t) to[t] = x[t * rows + i];
      }
    }
  });
  const auto* wb = static_cast<const uint8_t*>(w_t);
  const int64_t chunks = (cols + chunk - 1) / chunk;
  ctx.pool().run([&](int ith, int nth_run) {
    float* const sums = reinterpret_cast<float*>(arena + part_bytes * static_cast<size_t>(ith));
    const auto [first, last] = cpu::split_range(chunks, ith, nth_run);
    for (int64_t c = first; c < last; ++c) {
      const int64_t c0 = c * chunk, width = std::min(chunk, cols - c0);
      for (int64_t t0 = 0; t0 < n; t0 += tile) {
        const int64_t nt = std::min(tile, n - t0);
        for (int l = 0; l < lanes; ++l) {
          k.axpy_dense(width, wb + static_cast<size_t>(c0) * elem, ldw, by_lane + start[l],
                       start[l + 1] - start[l], coef + start[l] * n + t0, static_cast<size_t>(n),
                       nt, sums + l * tile * chunk, static_cast<size_t>(chunk));
        }
        fold_lanes(sums, lanes, tile * chunk, nt * chunk);
        for (int64_t t = 0; t < nt; ++t) {
          std::copy(sums + t * chunk, sums + t * chunk + width, y + (t0 + t) * cols + c0);
        }
      }
    }
  });
}

}  // namespace hearth
