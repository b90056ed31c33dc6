// lane_matvec (sparse_matmul.h): a float product through an input-major copy that reproduces the
// dense kernels' sums. A dense dot product of W's row o with x keeps L lanes, lane l adding
// w[o][i] x[i] for i = l (mod L) in ascending i, then folds the lanes in halves. Here lane l is
// a row [cols] of partial sums over the inputs of that lane: the one-token axpy (FMA in ascending
// order, or the scalar table's multiply-then-add, as that table's dot does) adds each listed
// input's row of W_t into it, and a final pass folds the L rows as the dot product folds its
// lanes. Threads take whole lanes (disjoint rows of W_t: no shared writes, no order to keep),
// runs of lanes with about equal numbers of inputs.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/sparse_axpy_chunks.h"
#include "ops/sparse_matmul.h"

namespace hearth {

void lane_matvec(cpu::CpuContext& ctx, DType wtype, DType wtype_t, const void* w_t, int64_t rows,
                 int64_t cols, const int32_t* idx, int64_t n_idx, const float* a, float* y,
                 bool lane_grouped) {
  axpy_detail::check_args("lane_matvec", wtype_t, rows, cols, idx, n_idx, 1);
  const int lanes = ctx.kernels().weights(wtype).dot_lanes;
  constexpr int kMaxLanes = 64;
  // The fold in halves needs a power of two, which also makes a lane a mask rather than a division.
  if (lanes <= 0 || lanes > kMaxLanes || (lanes & (lanes - 1)) != 0 ||
      ctx.kernels().weights(wtype_t).dot_lanes <= 0) {
    fail("lane_matvec: ", dtype_name(wtype), " to ", dtype_name(wtype_t), " is not float to float");
  }
  if (lane_grouped && kLaneGroups % lanes != 0) {
    fail("lane_matvec: ", lanes, " lanes do not divide the copy's ", kLaneGroups, " lane groups");
  }
  if (cols == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype_t);
  const auto ldw = static_cast<size_t>(row_bytes(wtype_t, cols));
  // Scratch: the lanes' partial sums [lanes, cols], then the list sorted by lane (stable, so
  // each lane's inputs stay ascending) and each lane's start [lanes + 1].
  const auto round = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t acc_bytes = round(static_cast<size_t>(lanes * cols) * sizeof(float));
  const size_t list_bytes = round(static_cast<size_t>(n_idx) * sizeof(int32_t));
  const size_t coef_bytes = round(static_cast<size_t>(n_idx) * sizeof(float));
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
    ++start[(idx[j] & lane_mask) + 1];
  }
  for (int l = 0; l < lanes; ++l) start[l + 1] += start[l];
  int64_t next[kMaxLanes];
  std::copy(start, start + lanes, next);
  for (int64_t j = 0; j < n_idx; ++j) {
    const int64_t at = next[idx[j] & lane_mask]++;
    by_lane[at] = lane_grouped ? static_cast<int32_t>(lane_grouped_row(idx[j], rows)) : idx[j];
    coef[at] = a[j];
  }
  const auto* wb = static_cast<const uint8_t*>(w_t);
  // Threads take runs of lanes holding about equal shares of the inputs: lane l's run of by_lane
  // starts at start[l], so thread i's first lane is the lane boundary nearest i / nth of them.
  const auto first_lane = [&](int i, int nth) {
    const int64_t goal = n_idx * i / nth;
    const int64_t* at = std::lower_bound(start, start + lanes, goal);
    if (at > start && goal - at[-1] < *at - goal) --at;
    return i == nth ? lanes : static_cast<int>(at - start);
  };
  // The last thread folds the lanes once every thread has added its own (a second pass of the
  // pool costs more than the fold).
  cpu::Turns turns;
  ctx.pool().run([&](int ith, int nth) {
    const int l0 = first_lane(ith, nth), l1 = first_lane(ith + 1, nth);
    for (int64_t l = l0; l < l1; ++l) {
      float* const row = acc + l * cols;
      std::memset(row, 0, static_cast<size_t>(cols) * sizeof(float));
      const int64_t b = start[l], e = start[l + 1];
      k.axpy(cols, wb, ldw, by_lane + b, e - b, coef + b, static_cast<size_t>(e - b), 1, row,
             static_cast<size_t>(cols));
    }
    turns.wait(ith);
    turns.done(ith);
    if (ith != nth - 1) return;
    for (int width = lanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) {
        float* const dst = acc + l * cols;
        const float* const src = acc + (l + width) * cols;
        for (int64_t c = 0; c < cols; ++c) dst[c] += src[c];
      }
    }
    std::copy(acc, acc + cols, y);
  });
}

}  // namespace hearth
