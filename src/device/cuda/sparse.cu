#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "device/cuda/cuda_check.h"
#include "device/cuda/device_util.cuh"
#include "device/cuda/sparse.cuh"

namespace hearth::gpu {
namespace {

constexpr int kCompactThreads = 1024;
constexpr int kAxpyThreads = 128;
constexpr int kReduceThreads = 256;

// A single block walks the columns 1024 at a time; each pass appends its firing columns after
// those of the previous passes at their exclusive prefix-sum positions.
__global__ void __launch_bounds__(kCompactThreads) compact_kernel(CompactArgs a) {
  using Scan = cub::BlockScan<int, kCompactThreads>;
  using Reduce = cub::BlockReduce<unsigned long long, kCompactThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  const int64_t k = a.count_dev ? *a.count_dev : a.count;
  int64_t kept = 0;
  unsigned long long pairs = 0;
  for (int64_t j0 = 0; j0 < k; j0 += kCompactThreads) {
    const int64_t j = j0 + threadIdx.x;
    int hits = 0;
    if (j < k) {
      for (int64_t t = 0; t < a.n; ++t) hits += a.values[t * a.ld + j] != 0.0f ? 1 : 0;
    }
    pairs += static_cast<unsigned long long>(hits);
    int pos = 0, total = 0;
    Scan(tmp.scan).ExclusiveSum(hits > 0 ? 1 : 0, pos, total);
    if (hits > 0 && a.idx_out) a.idx_out[kept + pos] = static_cast<int32_t>(j);
    kept += total;
    __syncthreads();  // tmp is reused by the next pass
  }
  const unsigned long long all = Reduce(tmp.reduce).Sum(pairs);
  if (threadIdx.x == 0) {
    *a.kept_out = static_cast<int32_t>(kept);
    *a.pairs_out = static_cast<uint64_t>(all);
  }
}

// The first position of the ascending list idx[0 .. count) whose row is at least `row`.
__device__ int64_t first_at_least(const int32_t* idx, int64_t count, int64_t row) {
  int64_t lo = 0, hi = count;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (idx[mid] < row) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Block (x, chunk, token tile): columns x·128 .., the listed rows in [chunk·kAxpyChunk,
// (chunk + 1)·kAxpyChunk) of W_t, tokens tile·kTokenTile ..; writes its partial sums (zero where
// it has no rows), summed by axpy_reduce_kernel. The chunks are ranges of rows, not of positions
// in the list, so a token's terms fall into the same chunks whichever other tokens' rows the list
// holds: its sum is the same bits alone or in any batch.
template <DType T>
__global__ void axpy_partial_kernel(AxpyArgs a) {
  // The chunk's positions [j0, j1) in the list, found once per block (two threads, one bound each).
  __shared__ int64_t bounds[2];
  if (threadIdx.x < 2) {
    const int64_t row = (static_cast<int64_t>(blockIdx.y) + threadIdx.x) * kAxpyChunk;
    bounds[threadIdx.x] = first_at_least(a.idx, *a.count_dev, row);
  }
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kAxpyThreads + threadIdx.x;
  if (c >= a.w_t.cols) return;
  const int64_t j0 = bounds[0], j1 = bounds[1];
  const int64_t t0 = static_cast<int64_t>(blockIdx.z) * kTokenTile;
  const int64_t left = a.n - t0;
  const int nt = left < kTokenTile ? static_cast<int>(left) : kTokenTile;

  float acc[kTokenTile];
#pragma unroll
  for (int t = 0; t < kTokenTile; ++t) acc[t] = 0.0f;
  for (int64_t j = j0; j < j1; ++j) {
    float coef[kTokenTile];
    bool any = false;
#pragma unroll
    for (int t = 0; t < kTokenTile; ++t) {
      coef[t] = t < nt ? a.a[(t0 + t) * a.lda + j] : 0.0f;
      any = any || coef[t] != 0.0f;
    }
    if (!any) continue;
    const uint8_t* row = static_cast<const uint8_t*>(a.w_t.data) + a.idx[j] * a.w_t.row_bytes;
    const float w = load_elem<T>(row, c);
#pragma unroll
    for (int t = 0; t < kTokenTile; ++t) acc[t] += coef[t] * w;
  }
  float* out = a.partial + (static_cast<int64_t>(blockIdx.y) * a.n + t0) * a.w_t.cols + c;
  for (int t = 0; t < nt; ++t) out[t * a.w_t.cols] = acc[t];
}

// y = the chunks' partial sums in ascending order (+ bias). A chunk without rows adds +0, which
// leaves every sum as it is (a partial starts at +0, and +0 + -0 is +0: it is -0 only where a
// product underflowed).
__global__ void axpy_reduce_kernel(const float* partial, int64_t chunks, int64_t n, int64_t cols,
                                   const float* bias, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (i >= n * cols) return;
  float sum = 0.0f;
  for (int64_t ch = 0; ch < chunks; ++ch) sum += partial[ch * n * cols + i];
  if (bias) sum += bias[i % cols];
  y[i] = sum;
}

__global__ void set_count_kernel(int32_t* dst, int32_t value) { *dst = value; }

}  // namespace

void launch_compact(const CompactArgs& a, cudaStream_t stream) {
  compact_kernel<<<1, kCompactThreads, 0, stream>>>(a);
  check_launch("launching compact");
}

void launch_axpy(const AxpyArgs& a, cudaStream_t stream) {
  if (a.n <= 0) return;
  const int64_t cols = a.w_t.cols, chunks = blocks_for(a.w_t.rows, kAxpyChunk);
  if (chunks > 0) {
    const dim3 grid(blocks_for(cols, kAxpyThreads), static_cast<unsigned>(chunks),
                    blocks_for(a.n, kTokenTile));
    dispatch_dtype(a.w_t.type, [&](auto tag) {
      axpy_partial_kernel<decltype(tag)::value><<<grid, kAxpyThreads, 0, stream>>>(a);
    });
    check_launch("launching axpy_partial");
  }
  axpy_reduce_kernel<<<blocks_for(a.n * cols, kReduceThreads), kReduceThreads, 0, stream>>>(
      a.partial, chunks, a.n, cols, a.bias, a.y);
  check_launch("launching axpy_reduce");
}

void launch_set_count(int32_t* dst, int32_t value, cudaStream_t stream) {
  set_count_kernel<<<1, 1, 0, stream>>>(dst, value);
  check_launch("launching set_count");
}

}  // namespace hearth::gpu
