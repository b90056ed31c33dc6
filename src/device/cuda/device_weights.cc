#include "device/cuda/device_weights.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "device/cuda/attention.cuh"
#include "device/cuda/cuda_check.h"
#include "device/cuda/linear.h"
#include "core/error.h"

namespace hearth::gpu {
namespace {

// The types the device kernels dequantize (linear.h); the others run on the host only.
bool device_supports(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
      return true;
    default:
      return false;
  }
}

std::string layer_name(size_t il, const char* what) { return str_cat("layer ", il, " ", what); }

// Checks that m is there with the expected shape (rows < 0: any) and a type the kernels take.
void check_matrix(const Matrix* m, int64_t rows, int64_t cols, const std::string& what) {
  if (!m || !m->present()) fail("the CUDA device needs ", what, ", which the model lacks");
  if ((rows >= 0 && m->rows != rows) || m->cols != cols) {
    fail(what, " is [", m->rows, ", ", m->cols, "], expected [", rows < 0 ? m->rows : rows, ", ",
         cols, "]");
  }
  if (!device_supports(m->type)) {
    fail(what, " has type ", dtype_name(m->type),
         ", which the CUDA backend cannot compute with yet (it takes f32, f16, bf16, q8_0, q4_0)");
  }
  if (m->cols % dtype_block_size(m->type) != 0) {
    fail(what, ": rows of ", m->cols, " elements are not whole ", dtype_name(m->type), " blocks");
  }
}

void copy_to_device(void* dst, const void* src, size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), ("copying " + what).c_str());
}

DeviceMatrix upload_whole(DeviceAllocator& alloc, const Matrix& m, const std::string& what) {
  DeviceMatrix d{m.type, m.rows, m.cols, DeviceBuffer(alloc, m.bytes(), what)};
  copy_to_device(d.data.get(), m.data, m.bytes(), what);
  return d;
}

// Rows hot[0..k) of m as a compact [k, cols] matrix: gathered into `staging`, then one copy.
DeviceMatrix upload_rows(DeviceAllocator& alloc, const Matrix& m, const std::vector<int32_t>& hot,
                         PinnedBuffer& staging, const std::string& what) {
  const auto rb = static_cast<size_t>(row_bytes(m.type, m.cols));
  auto* s = staging.as<uint8_t>();
  for (size_t j = 0; j < hot.size(); ++j) std::memcpy(s + j * rb, m.row(hot[j]), rb);
  const auto k = static_cast<int64_t>(hot.size());
  DeviceMatrix d{m.type, k, m.cols, DeviceBuffer(alloc, hot.size() * rb, what)};
  copy_to_device(d.data.get(), s, hot.size() * rb, what);
  return d;
}

DeviceBuffer upload_floats(DeviceAllocator& alloc, const float* v, int64_t n,
                           const std::string& what) {
  if (!v) return {};
  DeviceBuffer d(alloc, static_cast<size_t>(n) * sizeof(float), what);
  copy_to_device(d.get(), v, d.bytes(), what);
  return d;
}

DeviceBuffer upload_gathered_floats(DeviceAllocator& alloc, const float* v,
                                    const std::vector<int32_t>& hot, PinnedBuffer& staging,
                                    const std::string& what) {
  if (!v) return {};
  auto* s = staging.as<float>();
  for (size_t j = 0; j < hot.size(); ++j) s[j] = v[hot[j]];
  DeviceBuffer d(alloc, hot.size() * sizeof(float), what);
  copy_to_device(d.get(), s, d.bytes(), what);
  return d;
}

void check_attention_shape(const ModelConfig& c) {
  if (c.head_dim <= 0 || c.head_dim > kMaxHeadDim) {
    fail("the CUDA attention kernel takes heads of at most ", kMaxHeadDim, " dims, not ",
         c.head_dim);
  }
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0) {
    fail("the CUDA attention needs n_head (", c.n_head, ") to be a multiple of n_head_kv (",
         c.n_head_kv, ")");
  }
  if (c.rope_type != RopeType::None && (c.n_rot % 2 != 0 || c.n_rot > c.head_dim || c.n_rot < 0)) {
    fail("bad rotary dimension count ", c.n_rot, " for heads of ", c.head_dim);
  }
}

// Validates layer il of the model and returns the staging bytes its hot rows need.
size_t check_layer(const ModelConfig& c, const backend::DeviceLayer& l, size_t il) {
  if ((l.attention || !l.hot.empty()) && !l.weights) fail(layer_name(il, "has no weights"));
  const int64_t n_embd = c.n_embd, q_dim = c.n_head * c.head_dim, kv_dim = c.n_embd_kv();
  if (l.attention) {
    check_attention_shape(c);
    check_matrix(&l.weights->wq, q_dim, n_embd, layer_name(il, "attn_q"));
    check_matrix(&l.weights->wk, kv_dim, n_embd, layer_name(il, "attn_k"));
    check_matrix(&l.weights->wv, kv_dim, n_embd, layer_name(il, "attn_v"));
    check_matrix(&l.weights->wo, n_embd, q_dim, layer_name(il, "attn_output"));
  }
  if (l.hot.empty()) return 0;
  for (size_t j = 0; j < l.hot.size(); ++j) {
    if (l.hot[j] < 0 || l.hot[j] >= c.n_ff || (j > 0 && l.hot[j] <= l.hot[j - 1])) {
      fail(layer_name(il, "hot neurons"), " must be ascending ids in [0, ", c.n_ff, ")");
    }
  }
  const LayerWeights& w = *l.weights;
  const size_t k = l.hot.size();
  check_matrix(&w.ffn_up, c.n_ff, n_embd, layer_name(il, "ffn_up"));
  size_t staging = k * static_cast<size_t>(w.ffn_up.bytes() / c.n_ff);
  if (w.ffn_gate.present()) {
    check_matrix(&w.ffn_gate, c.n_ff, n_embd, layer_name(il, "ffn_gate"));
    staging = std::max(staging, k * static_cast<size_t>(w.ffn_gate.bytes() / c.n_ff));
  }
  check_matrix(l.down_t, c.n_ff, n_embd, layer_name(il, "ffn_down_t"));
  staging = std::max(staging, k * static_cast<size_t>(l.down_t->bytes() / c.n_ff));
  if (l.predictor) {
    check_matrix(&w.fc1, -1, n_embd, layer_name(il, "fc1"));
    check_matrix(&w.fc2, c.n_ff, w.fc1.rows, layer_name(il, "fc2"));
    staging = std::max(staging, k * static_cast<size_t>(w.fc2.bytes() / c.n_ff));
  }
  return std::max(staging, k * sizeof(float));
}

void upload_layer(DeviceAllocator& alloc, const ModelConfig& c, const backend::DeviceLayer& l,
                  size_t il, PinnedBuffer& staging, DeviceLayerWeights& d) {
  if (l.attention) {
    const LayerWeights& w = *l.weights;
    d.attention = true;
    d.attn_norm = upload_floats(alloc, w.attn_norm, c.n_embd, layer_name(il, "attn_norm"));
    d.wq = upload_whole(alloc, w.wq, layer_name(il, "attn_q"));
    d.wk = upload_whole(alloc, w.wk, layer_name(il, "attn_k"));
    d.wv = upload_whole(alloc, w.wv, layer_name(il, "attn_v"));
    d.wo = upload_whole(alloc, w.wo, layer_name(il, "attn_output"));
  }
  if (l.hot.empty()) return;
  const LayerWeights& w = *l.weights;
  d.n_hot = static_cast<int64_t>(l.hot.size());
  d.up = upload_rows(alloc, w.ffn_up, l.hot, staging, layer_name(il, "ffn_up (hot rows)"));
  if (w.ffn_gate.present()) {
    d.gate = upload_rows(alloc, w.ffn_gate, l.hot, staging, layer_name(il, "ffn_gate (hot rows)"));
  }
  d.down_t = upload_rows(alloc, *l.down_t, l.hot, staging, layer_name(il, "ffn_down_t (hot rows)"));
  d.up_bias = upload_gathered_floats(alloc, w.ffn_up_b, l.hot, staging,
                                     layer_name(il, "ffn_up bias (hot rows)"));
  if (l.predictor) {
    d.predictor = true;
    d.fc1 = upload_whole(alloc, w.fc1, layer_name(il, "fc1"));
    d.fc2 = upload_rows(alloc, w.fc2, l.hot, staging, layer_name(il, "fc2 (hot rows)"));
  }
}

}  // namespace

ModelExtents extents_bound(const ModelConfig& c) {
  ModelExtents e;
  e.attention = true;
  e.k_max = c.n_ff;
  e.h_max = c.n_ff;
  e.gemm_weights = gemm_weight_bytes(DType::Q8_0, c.n_head * c.head_dim, c.n_embd);
  return e;
}

std::unique_ptr<DeviceModelData> upload_model(DeviceAllocator& alloc,
                                              const backend::DeviceModel& model) {
  const ModelConfig& c = model.config;
  if (static_cast<int64_t>(model.layers.size()) != c.n_layer) {
    fail("the device model has ", model.layers.size(), " layers, its config ", c.n_layer);
  }
  size_t staging_bytes = 0;
  for (size_t il = 0; il < model.layers.size(); ++il) {
    staging_bytes = std::max(staging_bytes, check_layer(c, model.layers[il], il));
  }
  PinnedBuffer staging(staging_bytes, "staging the hot neurons' rows");

  auto out = std::make_unique<DeviceModelData>();
  out->config = c;
  out->layers.resize(model.layers.size());
  ModelExtents& e = out->extents;
  for (size_t il = 0; il < model.layers.size(); ++il) {
    DeviceLayerWeights& d = out->layers[il];
    upload_layer(alloc, c, model.layers[il], il, staging, d);
    e.attention = e.attention || d.attention;
    e.k_max = std::max(e.k_max, d.n_hot);
    if (d.predictor) e.h_max = std::max(e.h_max, d.fc1.rows);
    for (const DeviceMatrix* m : {&d.wq, &d.wk, &d.wv, &d.wo}) {
      if (m->present())
        e.gemm_weights = std::max(e.gemm_weights, gemm_weight_bytes(m->type, m->rows, m->cols));
    }
  }
  return out;
}

}  // namespace hearth::gpu
