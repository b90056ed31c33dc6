#include "ops/matmul.h"

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
  check_shape("matmul", wtype, rows, cols, n);
  if (rows == 0 || n == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  size_t ldx = 0;
  const uint8_t* xa = prepare_activations(ctx, k, x, cols, n, &ldx);
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const auto* wb = static_cast<const uint8_t*>(w);
  run_split(ctx, rows, n, ldw, ldx, [&](int64_t r0, int64_t r1, int64_t t0, int64_t tn) {
    k.gemm(cols, wb + r0 * ldw, ldw, r1 - r0, xa + t0 * ldx, ldx, tn, y + t0 * rows + r0,
           static_cast<size_t>(rows));
  });
}

}  // namespace hearth
