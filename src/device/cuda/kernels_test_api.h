// Host-callable wrappers around the CUDA kernels, for tests/gpu: plain C++ signatures over host
// arrays; each call allocates device memory, copies the inputs in, launches the same launchers the
// device uses, copies the results back and frees everything. Arrays [n, k] are row-major with no
// padding. Every call needs a CUDA GPU (device 0). Internal: tests only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "hearth/types.h"
#include "ops/rope.h"

namespace hearth::gpu::test_api {

// y[n_rows, n] = rms_norm(x) · w (w may be null).
void rms_norm(const float* x, const float* w, float eps, int64_t n_rows, int64_t n, float* y);

// Rotates x[n_tokens, n_head, head_dim] in place at positions pos0 .., with the table's cos/sin
// and style (pos0 + n_tokens <= table.n_ctx()).
void rope(const RopeTable& table, float* x, int64_t n_tokens, int n_head, int head_dim,
          int64_t pos0);

// cache[n_ctx, row] (F16 bits or F32, in and out) gets src[n_tokens, row] at rows pos0 ...
void kv_store(bool f16, const float* src, int64_t n_tokens, int64_t row, int64_t pos0,
              int64_t n_ctx, void* cache);

// out[n_tokens, n_head, head_dim] = attention of q over the caches [n_ctx, n_head_kv, head_dim]
// (F16 bits or F32), rows 0 .. pos0 + n_tokens - 1 used.
void attention(int n_head, int n_head_kv, int head_dim, bool f16, int64_t n_ctx,
               const void* k_cache, const void* v_cache, const float* q, int64_t pos0,
               int64_t n_tokens, float* out);

// y[n, rows] (=, or += with accumulate) x[n, cols] · W^T, as the attention block's projections
// compute it (matvec, or cuBLAS from kGemmMinTokens tokens on).
void linear(DType t, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
            bool accumulate);

// y[n, k] = x[n, cols] · W[idx]^T + bias[idx] (bias may be null).
void gather_matvec(DType t, const void* w, int64_t rows, int64_t cols, const int32_t* idx,
                   int64_t k, const float* bias, const float* x, int64_t n, float* y);

// y[n, cols] = Σ_j a[t, j] · W_t[idx_j] + bias (a is [n, k]; bias may be null).
void axpy(DType t, const void* w_t, int64_t rows, int64_t cols, const int32_t* idx, int64_t k,
          const float* a, int64_t n, const float* bias, float* y);

struct CompactResult {
  std::vector<int32_t> idx;  // the kept columns, ascending
  int32_t kept = 0;
  uint64_t pairs = 0;
};
// The columns of values[n, k] with a non-zero entry for some token.
CompactResult compact(const float* values, int64_t n, int64_t k);

void activate(FfnActivation act, const float* x, int64_t n, float* y);
// In place on f[n, k] and score[n, k]: activation.cuh's act_mask and score_mask.
void act_mask(FfnActivation act, float threshold, float* f, int64_t n, int64_t k);
void score_mask(float threshold, float* score, int64_t n, int64_t k);
// Compact arrays g, u, a [n, k] (columns < count used), full arrays mask, f [n, k], list
// idx[count]: activation.cuh's glu (g, mask may be null), oracle_combine (u may be null) and
// abs_mask.
void glu(FfnActivation act, bool up_relu, const float* g, float* u, const float* mask,
         const int32_t* idx, int64_t count, int64_t n, int64_t k);
void oracle_combine(bool up_relu, const float* u, const float* f, const int32_t* idx, int64_t count,
                    int64_t n, int64_t k, float* a);
void abs_mask(float threshold, float* a, int64_t count, int64_t n, int64_t k);

// mask[n, k] = (fc2[k, h] · relu(fc1[h, n_embd] · p[n, n_embd])) >= threshold ? 1 : 0.
void predictor(DType fc1_type, const void* fc1, int64_t h, DType fc2_type, const void* fc2,
               int64_t k, int64_t n_embd, const float* p, int64_t n, float threshold, float* mask);

}  // namespace hearth::gpu::test_api
