#include "device/cuda/kernels_test_api.h"
#include "device/cuda/cublas_api.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>

#include "device/cuda/activation.cuh"
#include "device/cuda/attention.cuh"
#include "device/cuda/cuda_check.h"
#include "device/cuda/device_memory.h"
#include "device/cuda/hot_ffn.h"
#include "device/cuda/linear.h"
#include "device/cuda/matmul.cuh"
#include "device/cuda/norm.cuh"
#include "device/cuda/rope.cuh"
#include "device/cuda/sparse.cuh"

namespace hearth::gpu::test_api {
namespace {

// The device copies of one call's arrays, freed when it ends. Launches go to the default stream.
class Scratch {
 public:
  Scratch() : alloc_(0) { check(cudaSetDevice(0), "selecting CUDA device 0"); }

  template <typename T>
  T* alloc(int64_t count) {
    bufs_.emplace_back(alloc_, static_cast<size_t>(count) * sizeof(T), "a test buffer");
    return bufs_.back().as<T>();
  }
  // nullptr for a null host array.
  template <typename T>
  T* upload(const T* host, int64_t count) {
    if (!host) return nullptr;
    T* d = alloc<T>(count);
    if (count > 0) {
      check(cudaMemcpy(d, host, static_cast<size_t>(count) * sizeof(T), cudaMemcpyHostToDevice),
            "copying a test input");
    }
    return d;
  }
  const void* upload_weights(DType t, const void* w, int64_t rows, int64_t cols) {
    return upload(static_cast<const uint8_t*>(w), rows * row_bytes(t, cols));
  }
  template <typename T>
  void download(T* host, const T* dev, int64_t count) {
    check(cudaDeviceSynchronize(), "running a test kernel");
    if (count > 0) {
      check(cudaMemcpy(host, dev, static_cast<size_t>(count) * sizeof(T), cudaMemcpyDeviceToHost),
            "copying a test result");
    }
  }
  DeviceAllocator& allocator() { return alloc_; }

 private:
  DeviceAllocator alloc_;  // declared first: destroyed after the buffers
  std::vector<DeviceBuffer> bufs_;
};

constexpr cudaStream_t kStream = nullptr;

MatrixView view(DType t, const void* data, int64_t rows, int64_t cols) {
  return MatrixView{t, data, rows, cols, row_bytes(t, cols)};
}

struct CublasDeleter {
  void operator()(cublasHandle_t h) const { cublas().destroy(h); }
};

}  // namespace

void rms_norm(const float* x, const float* w, float eps, int64_t n_rows, int64_t n, float* y) {
  Scratch s;
  const float* dx = s.upload(x, n_rows * n);
  float* dy = s.alloc<float>(n_rows * n);
  launch_rms_norm(dx, s.upload(w, n), eps, n_rows, n, dy, kStream);
  s.download(y, dy, n_rows * n);
}

void rope(const RopeTable& table, float* x, int64_t n_tokens, int n_head, int head_dim,
          int64_t pos0) {
  Scratch s;
  const int n_rot = table.params().n_rot;
  const int64_t count = n_tokens * n_head * head_dim;
  float* dx = s.upload(x, count);
  const float* dt = s.upload(table.cos_sin(0), table.n_ctx() * n_rot);
  launch_rope(dx, n_tokens, n_head, head_dim, static_cast<int64_t>(n_head) * head_dim, dt, n_rot,
              table.params().style == RopeStyle::Neox, pos0, kStream);
  s.download(x, dx, count);
}

void kv_store(bool f16, const float* src, int64_t n_tokens, int64_t row, int64_t pos0,
              int64_t n_ctx, void* cache) {
  Scratch s;
  const int64_t bytes = n_ctx * row * (f16 ? 2 : 4);
  uint8_t* dc = s.upload(static_cast<const uint8_t*>(cache), bytes);
  launch_kv_store(f16, s.upload(src, n_tokens * row), n_tokens, row, pos0, dc, kStream);
  s.download(static_cast<uint8_t*>(cache), dc, bytes);
}

void attention(int n_head, int n_head_kv, int head_dim, bool f16, int64_t n_ctx,
               const void* k_cache, const void* v_cache, const float* q, int64_t pos0,
               int64_t n_tokens, float* out) {
  Scratch s;
  const int64_t bytes = n_ctx * n_head_kv * head_dim * (f16 ? 2 : 4);
  const int64_t q_count = n_tokens * n_head * head_dim;
  const AttentionShape shape{n_head, n_head_kv, head_dim,
                             1.0f / std::sqrt(static_cast<float>(head_dim))};
  float* dout = s.alloc<float>(q_count);
  launch_attention(shape, f16, s.upload(static_cast<const uint8_t*>(k_cache), bytes),
                   s.upload(static_cast<const uint8_t*>(v_cache), bytes), s.upload(q, q_count),
                   pos0, n_tokens, dout, kStream);
  s.download(out, dout, q_count);
}

void linear(DType t, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
            bool accumulate) {
  Scratch s;
  const MatrixView wv = view(t, s.upload_weights(t, w, rows, cols), rows, cols);
  float* dy = s.upload(y, n * rows);
  GemmContext g;
  std::unique_ptr<cublasContext, CublasDeleter> handle;
  if (n >= kGemmMinTokens) {
    cublasHandle_t h = nullptr;
    check_cublas(cublas().create(&h), "creating a cuBLAS handle");
    handle.reset(h);
    check_cublas(cublas().set_stream(h, kStream), "binding cuBLAS to the default stream");
    g.handle = h;
    g.act_bytes = gemm_act_bytes(n, cols);
    g.act = s.alloc<uint8_t>(static_cast<int64_t>(g.act_bytes));
    g.weight_bytes = gemm_weight_bytes(t, rows, cols);
    g.weights = s.alloc<uint8_t>(static_cast<int64_t>(g.weight_bytes));
  }
  linear(g, wv, s.upload(x, n * cols), n, dy, accumulate, kStream);
  s.download(y, dy, n * rows);
}

void gather_matvec(DType t, const void* w, int64_t rows, int64_t cols, const int32_t* idx,
                   int64_t k, const float* bias, const float* x, int64_t n, float* y) {
  Scratch s;
  const int32_t count = static_cast<int32_t>(k);
  float* dy = s.alloc<float>(n * k);
  launch_matvec({.w = view(t, s.upload_weights(t, w, rows, cols), rows, cols),
                 .idx = s.upload(idx, k),
                 .count_dev = s.upload(&count, 1),
                 .max_count = k,
                 .x = s.upload(x, n * cols),
                 .ldx = cols,
                 .n = n,
                 .bias = s.upload(bias, rows),
                 .y = dy,
                 .ldy = k},
                kStream);
  s.download(y, dy, n * k);
}

void axpy(DType t, const void* w_t, int64_t rows, int64_t cols, const int32_t* idx, int64_t k,
          const float* a, int64_t n, const float* bias, float* y) {
  Scratch s;
  const int32_t count = static_cast<int32_t>(k);
  float* dy = s.alloc<float>(n * cols);
  launch_axpy({.w_t = view(t, s.upload_weights(t, w_t, rows, cols), rows, cols),
               .idx = s.upload(idx, k),
               .count_dev = s.upload(&count, 1),
               .a = s.upload(a, n * k),
               .lda = k,
               .n = n,
               .bias = s.upload(bias, cols),
               .partial = s.alloc<float>(axpy_partial_floats(rows, n, cols)),
               .y = dy},
              kStream);
  s.download(y, dy, n * cols);
}

CompactResult compact(const float* values, int64_t n, int64_t k) {
  Scratch s;
  const CompactArgs a{.values = s.upload(values, n * k),
                      .ld = k,
                      .n = n,
                      .count = k,
                      .idx_out = s.alloc<int32_t>(k),
                      .kept_out = s.alloc<int32_t>(1),
                      .pairs_out = s.alloc<uint64_t>(1)};
  launch_compact(a, kStream);
  CompactResult r;
  s.download(&r.kept, a.kept_out, 1);
  s.download(&r.pairs, a.pairs_out, 1);
  r.idx.resize(static_cast<size_t>(r.kept));
  s.download(r.idx.data(), a.idx_out, r.kept);
  return r;
}

void activate(FfnActivation act, const float* x, int64_t n, float* y) {
  Scratch s;
  float* dy = s.alloc<float>(n);
  launch_activate(act, s.upload(x, n), n, dy, kStream);
  s.download(y, dy, n);
}

void act_mask(FfnActivation act, float threshold, float* f, int64_t n, int64_t k) {
  Scratch s;
  float* df = s.upload(f, n * k);
  launch_act_mask(act, threshold, df, n, k, k, kStream);
  s.download(f, df, n * k);
}

void score_mask(float threshold, float* score, int64_t n, int64_t k) {
  Scratch s;
  float* ds = s.upload(score, n * k);
  launch_score_mask(threshold, ds, n, k, k, kStream);
  s.download(score, ds, n * k);
}

void glu(FfnActivation act, bool up_relu, const float* g, float* u, const float* mask,
         const int32_t* idx, int64_t count, int64_t n, int64_t k) {
  Scratch s;
  const int32_t c = static_cast<int32_t>(count);
  const GluArgs a{.act = act,
                  .up_relu = up_relu,
                  .g = s.upload(g, n * k),
                  .u = s.upload(u, n * k),
                  .mask = s.upload(mask, n * k),
                  .idx = s.upload(idx, count),
                  .count_dev = s.upload(&c, 1),
                  .max_count = k,
                  .n = n,
                  .ld = k};
  launch_glu(a, kStream);
  s.download(u, a.u, n * k);
}

void oracle_combine(bool up_relu, const float* u, const float* f, const int32_t* idx, int64_t count,
                    int64_t n, int64_t k, float* a) {
  Scratch s;
  const int32_t c = static_cast<int32_t>(count);
  float* da = s.upload(a, n * k);
  launch_oracle_combine(up_relu, s.upload(u, n * k), s.upload(f, n * k), s.upload(idx, count),
                        s.upload(&c, 1), k, n, k, da, kStream);
  s.download(a, da, n * k);
}

void abs_mask(float threshold, float* a, int64_t count, int64_t n, int64_t k) {
  Scratch s;
  const int32_t c = static_cast<int32_t>(count);
  float* da = s.upload(a, n * k);
  launch_abs_mask(threshold, da, s.upload(&c, 1), k, n, k, kStream);
  s.download(a, da, n * k);
}

void predictor(DType fc1_type, const void* fc1, int64_t h, DType fc2_type, const void* fc2,
               int64_t k, int64_t n_embd, const float* p, int64_t n, float threshold, float* mask) {
  Scratch s;
  const MatrixView v1 = view(fc1_type, s.upload_weights(fc1_type, fc1, h, n_embd), h, n_embd);
  const MatrixView v2 = view(fc2_type, s.upload_weights(fc2_type, fc2, k, h), k, h);
  float* dm = s.alloc<float>(n * k);
  enqueue_predictor(v1, v2, s.upload(p, n * n_embd), n, s.alloc<float>(n * h), threshold, dm, k,
                    kStream);
  s.download(mask, dm, n * k);
}

}  // namespace hearth::gpu::test_api
