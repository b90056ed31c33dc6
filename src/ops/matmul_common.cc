#include "ops/matmul_common.h"

#include "core/error.h"

namespace hearth::matmul_detail {
namespace {

// Below this many weight bytes per thread, waking workers costs more than it saves.
constexpr int64_t kMinBytesPerThread = 32 * 1024;

}  // namespace

void check_shape(const char* op, DType wtype, int64_t rows, int64_t cols, int64_t n) {
  if (rows < 0 || cols < 0 || n < 0) {
    fail(op, ": negative shape (", rows, ", ", cols, ", ", n, ")");
  }
  if (cols % dtype_block_size(wtype) != 0) {
    fail(op, ": ", cols, " columns is not a multiple of the ", dtype_name(wtype), " block size");
  }
}

int threads_for(const cpu::CpuContext& ctx, int64_t weight_bytes) {
  const int64_t useful = std::max<int64_t>(1, weight_bytes / kMinBytesPerThread);
  return static_cast<int>(std::min<int64_t>(ctx.n_threads(), useful));
}

const uint8_t* prepare_activations(cpu::CpuContext& ctx, const cpu::WeightKernels& k,
                                   const float* x, int64_t cols, int64_t n, size_t* ldx) {
  *ldx = cpu::act_row_bytes(k.act, cols);
  if (k.act == cpu::ActFormat::F32) return reinterpret_cast<const uint8_t*>(x);
  auto* buf = static_cast<uint8_t*>(ctx.scratch(*ldx * static_cast<size_t>(n)));
  if (n == 1) {
    // A single row costs about as much as reading one weight row: not worth waking the pool.
    k.to_act(x, buf, cols);
  } else {
    auto quantize = [&](int ith, int nth) {
      const auto [t0, t1] = cpu::split_range(n, ith, nth);
      for (int64_t t = t0; t < t1; ++t) k.to_act(x + t * cols, buf + t * *ldx, cols);
    };
    ctx.pool().run(quantize);
  }
  return buf;
}

}  // namespace hearth::matmul_detail
