#include "ops/matmul.h"

#include "backend/cpu/kernels/row_groups.h"
#include "core/error.h"
#include "ops/matmul_common.h"

namespace hearth {

using matmul_detail::check_shape;
using matmul_detail::prepare_activations;
using matmul_detail::run_split;

void matvec(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, float* y) {
  matmul(ctx, wtype, w, rows, cols, x, 1, y);
}

void matmul(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, int64_t n, float* y) {
  const MatmulPart part{w, rows, y};
  matmul_parts(ctx, wtype, cols, {&part, 1}, x, n);
}

void matmul_parts(cpu::CpuContext& ctx, DType wtype, int64_t cols,
                  std::span<const MatmulPart> parts, const float* x, int64_t n) {
  int64_t total = 0;
  for (const MatmulPart& p : parts) {
    check_shape("matmul", wtype, p.rows, cols, n);
    total += p.rows;
  }
  if (total == 0 || n == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  size_t ldx = 0;
  const uint8_t* xa = prepare_activations(ctx, k, x, cols, n, &ldx);
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  run_split(
      ctx, total, n, ldw, ldx,
      [&](int64_t r0, int64_t r1, int64_t t0, int64_t tn) {
        matmul_detail::for_each_piece(
            parts, r0, r1, [&](const MatmulPart& p, int64_t b, int64_t e) {
              k.gemm(cols, static_cast<const uint8_t*>(p.w) + b * ldw, ldw, e - b, xa + t0 * ldx,
                     ldx, tn, p.y + t0 * p.rows + b, static_cast<size_t>(p.rows));
            });
      },
      matmul_detail::kRowQuantum, k.gemv_streams);
}

void matmul_row_groups(cpu::CpuContext& ctx, DType wtype, int64_t cols,
                       std::span<const MatmulPart> parts, const float* x, int64_t n) {
  constexpr int64_t kRows = cpu::kGroupRows;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  if (!k.gemm_row_groups) fail("matmul: ", dtype_name(wtype), " has no row groups");
  // The parts counted in groups.
  MatmulPart groups[4];
  if (parts.size() > std::size(groups)) fail("matmul: more than 4 parts of row groups");
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    check_shape("matmul", wtype, parts[i].rows, cols, n);
    if (parts[i].rows % kRows != 0) fail("matmul: row groups of ", parts[i].rows, " rows");
    groups[i] = {parts[i].w, parts[i].rows / kRows, parts[i].y};
    total += groups[i].rows;
  }
  if (total == 0 || n == 0) return;
  size_t ldx = 0;
  const uint8_t* xa = prepare_activations(ctx, k, x, cols, n, &ldx);
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const std::span<const MatmulPart> stacked(groups, parts.size());
  run_split(
      ctx, total, n, kRows * ldw, ldx,
      [&](int64_t g0, int64_t g1, int64_t t0, int64_t tn) {
        matmul_detail::for_each_piece(
            stacked, g0, g1, [&](const MatmulPart& p, int64_t b, int64_t e) {
              const size_t rows = static_cast<size_t>(p.rows * kRows);
              k.gemm_row_groups(cols, static_cast<const uint8_t*>(p.w) + b * kRows * ldw, ldw,
                                e - b, xa + t0 * ldx, ldx, tn, p.y + t0 * rows + b * kRows, rows);
            });
      },
      /*quantum=*/1);
}

}  // namespace hearth
