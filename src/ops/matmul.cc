#include "ops/matmul.h"

#include <algorithm>
#include <tuple>

#include "core/error.h"

namespace hearth {
namespace {

// Below this many weight bytes per thread, waking workers costs more than it saves.
constexpr int64_t kMinBytesPerThread = 32 * 1024;
// Activation rows of one token block should stay in L2 while every weight tile of the thread's
// row range passes over them.
constexpr size_t kActBlockBytes = 384 * 1024;
// Token blocks are a multiple of the tile kernels' token count so only the last block has an
// edge tile.
constexpr int64_t kTokenQuantum = 4;

void check_shape(DType wtype, int64_t rows, int64_t cols, int64_t n) {
  if (rows < 0 || cols < 0 || n < 0) {
    fail("matmul: negative shape (", rows, ", ", cols, ", ", n, ")");
  }
  if (cols % dtype_block_size(wtype) != 0) {
    fail("matmul: ", cols, " columns is not a multiple of the ", dtype_name(wtype), " block size");
  }
}

int threads_for(const cpu::CpuContext& ctx, int64_t weight_bytes) {
  const int64_t useful = std::max<int64_t>(1, weight_bytes / kMinBytesPerThread);
  return static_cast<int>(std::min<int64_t>(ctx.n_threads(), useful));
}

}  // namespace

void matvec(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, float* y) {
  check_shape(wtype, rows, cols, 1);
  if (rows == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  const void* xa = x;
  if (k.act != cpu::ActFormat::F32) {
    // One quantization per call, shared by every thread; it costs about as much as reading a
    // single weight row.
    void* buf = ctx.scratch(cpu::act_row_bytes(k.act, cols));
    k.to_act(x, buf, cols);
    xa = buf;
  }
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const auto* wb = static_cast<const uint8_t*>(w);
  const int used = threads_for(ctx, rows * static_cast<int64_t>(ldw));
  auto task = [&](int ith, int) {
    if (ith >= used) return;
    const auto [r0, r1] = cpu::split_range(rows, ith, used);
    if (r1 > r0) k.gemm(cols, wb + r0 * ldw, ldw, r1 - r0, xa, 0, 1, y + r0, 0);
  };
  if (used == 1) {
    task(0, 1);
  } else {
    ctx.pool().run(task);
  }
}

void matmul(cpu::CpuContext& ctx, DType wtype, const void* w, int64_t rows, int64_t cols,
            const float* x, int64_t n, float* y) {
  check_shape(wtype, rows, cols, n);
  if (n == 1) return matvec(ctx, wtype, w, rows, cols, x, y);
  if (rows == 0 || n == 0) return;
  const cpu::WeightKernels& k = ctx.kernels().weights(wtype);
  const int nth = ctx.n_threads();
  const size_t ldx = cpu::act_row_bytes(k.act, cols);
  const void* xa = x;
  if (k.act != cpu::ActFormat::F32) {
    auto* buf = static_cast<uint8_t*>(ctx.scratch(ldx * static_cast<size_t>(n)));
    auto quantize = [&](int ith, int nt) {
      const auto [t0, t1] = cpu::split_range(n, ith, nt);
      for (int64_t t = t0; t < t1; ++t) k.to_act(x + t * cols, buf + t * ldx, cols);
    };
    ctx.pool().run(quantize);
    xa = buf;
  }
  const auto ldw = static_cast<size_t>(row_bytes(wtype, cols));
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xa);
  const int64_t block = std::max<int64_t>(
      kTokenQuantum, static_cast<int64_t>(kActBlockBytes / ldx) / kTokenQuantum * kTokenQuantum);
  // Threads own disjoint weight rows (each weight byte is read by one core) unless there are too
  // few rows to go round, as in small attention-sized products; then they own tokens.
  const bool split_rows = rows >= 16 * static_cast<int64_t>(nth);
  auto task = [&](int ith, int nt) {
    int64_t r0 = 0, r1 = rows, t_begin = 0, t_end = n;
    if (split_rows) {
      std::tie(r0, r1) = cpu::split_range(rows, ith, nt);
    } else {
      std::tie(t_begin, t_end) = cpu::split_range(n, ith, nt);
    }
    if (r1 <= r0) return;
    for (int64_t t0 = t_begin; t0 < t_end; t0 += block) {
      const int64_t tn = std::min(block, t_end - t0);
      k.gemm(cols, wb + r0 * ldw, ldw, r1 - r0, xb + t0 * ldx, ldx, tn, y + t0 * rows + r0,
             static_cast<size_t>(rows));
    }
  };
  ctx.pool().run(task);
}

}  // namespace hearth
