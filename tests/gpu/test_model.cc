#include "test_model.h"

#include <cstring>

#include "device/cuda_entry.h"
#include "core/quantize.h"
#include "model/config.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/vec.h"

namespace hearth::test {

TestModel::TestModel(const TestModelOptions& o) {
  ModelConfig& c = config_;
  c.arch = "llama";
  c.n_vocab = 32;
  c.n_embd = o.n_embd;
  c.n_layer = o.n_layer;
  c.n_ff = o.n_ff;
  c.n_head = o.n_head;
  c.n_head_kv = o.n_head_kv;
  c.head_dim = o.n_embd / o.n_head;
  c.n_rot = o.n_rot;
  c.rope_type = o.rope;
  c.ffn_act = o.act;
  c.ffn_gated = o.gated;
  c.ffn_up_relu = o.up_relu;
  const int64_t q_dim = c.n_head * c.head_dim;
  // Scales keep the products O(1): attention scores that are neither flat nor one-hot.
  const float s = 1.0f / static_cast<float>(o.n_embd);
  for (int64_t il = 0; il < o.n_layer; ++il) {
    LayerWeights& l = weights_.layers.emplace_back();
    l.attn_norm = vector(c.n_embd, 0.5f, 1.5f);
    l.ffn_norm = vector(c.n_embd, 0.5f, 1.5f);
    l.wq = matrix(o.type, q_dim, c.n_embd, 8.0f * s);
    l.wk = matrix(o.type, c.n_embd_kv(), c.n_embd, 8.0f * s);
    l.wv = matrix(o.type, c.n_embd_kv(), c.n_embd, 8.0f * s);
    l.wo = matrix(o.type, c.n_embd, q_dim, 8.0f * s);
    if (o.gated) l.ffn_gate = matrix(o.type, c.n_ff, c.n_embd, 8.0f * s);
    l.ffn_up = matrix(o.type, c.n_ff, c.n_embd, 8.0f * s);
    l.ffn_down_t = matrix(o.type, c.n_ff, c.n_embd, 8.0f * s);
    if (o.biases) {
      l.ffn_up_b = vector(c.n_ff, -0.5f, 0.5f);
      l.ffn_down_b = vector(c.n_embd, -0.5f, 0.5f);
    }
    l.fc1 = matrix(o.type, o.predictor_width, c.n_embd, 8.0f * s);
    l.fc2 = matrix(DType::F16, c.n_ff, o.predictor_width, 1.0f);
  }
}

Matrix TestModel::matrix(DType t, int64_t rows, int64_t cols, float scale) {
  const auto f = random_floats(rows * cols, ++seed_, scale);
  auto& blob = blobs_.emplace_back(static_cast<size_t>(rows * row_bytes(t, cols)));
  quantize_rows(t, f.data(), blob.data(), rows, cols);
  return Matrix{t, blob.data(), rows, cols};
}

const float* TestModel::vector(int64_t n, float lo, float hi) {
  return vectors_.emplace_back(uniform_floats(n, ++seed_, lo, hi)).data();
}

backend::DeviceModel TestModel::device_model(bool attention, const std::vector<int32_t>& hot,
                                             bool predictor) const {
  backend::DeviceModel m;
  m.config = config_;
  for (const LayerWeights& l : weights_.layers) {
    backend::DeviceLayer& d = m.layers.emplace_back();
    d.attention = attention;
    d.hot = hot;
    d.weights = &l;
    d.down_t = &l.ffn_down_t;
    d.predictor = predictor;
  }
  return m;
}

GpuSession open_gpu_session(const backend::DeviceModel& model,
                            const backend::DeviceSessionOptions& options) {
  GpuSession g;
  g.device = backend::make_cuda_device(0);
  g.device->load(model);
  g.session = g.device->open_session(options);
  return g;
}

HostAttention::HostAttention(const TestModel& model, int64_t n_ctx, int n_seq, KvType kv_type,
                             bool exact_weights)
    : model_(model), ctx_(1, cpu::Isa::Scalar), n_seq_(n_seq) {
  const ModelConfig& c = model.config();
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = model.layer(il);
    for (const Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo}) {
      if (!exact_weights || !quantized(w->type)) {
        projections_.push_back(*w);
        continue;
      }
      std::vector<float>& f = decoded_.emplace_back(static_cast<size_t>(w->rows * w->cols));
      const auto* src = static_cast<const uint8_t*>(w->data);
      for (int64_t r = 0; r < w->rows; ++r) {
        dequantize_row(w->type, src + r * row_bytes(w->type, w->cols), f.data() + r * w->cols,
                       w->cols);
      }
      projections_.push_back(Matrix{DType::F32, f.data(), w->rows, w->cols});
    }
  }
  params_.n_head = static_cast<int>(c.n_head);
  params_.n_head_kv = static_cast<int>(c.n_head_kv);
  params_.head_dim = static_cast<int>(c.head_dim);
  params_.n_ctx = n_ctx;
  params_.kv_type = kv_type == KvType::F16 ? DType::F16 : DType::F32;
  RopeParams rp;
  rp.n_rot = static_cast<int>(c.n_rot);
  rp.freq_base = c.rope_freq_base;
  rp.style = c.rope_type == RopeType::Neox ? RopeStyle::Neox : RopeStyle::Normal;
  rope_ = RopeTable(rp, n_ctx);
  for (int64_t i = 0; i < c.n_layer * n_seq; ++i) {
    k_cache_.emplace_back(kv_cache_bytes(params_));
    v_cache_.emplace_back(kv_cache_bytes(params_));
  }
  const auto rows = static_cast<size_t>(n_ctx);
  xn_.resize(rows * c.n_embd);
  q_.resize(rows * c.n_head * c.head_dim);
  k_.resize(rows * c.n_embd_kv());
  v_.resize(rows * c.n_embd_kv());
  att_.resize(q_.size());
  out_.resize(xn_.size());
  workspace_.resize(attention_workspace_bytes(params_, 1) / sizeof(CacheLine) + 1);
}

const Matrix& HostAttention::projection(int64_t il, int which) const {
  return projections_[static_cast<size_t>(il * 4 + which)];
}

void HostAttention::run(int64_t il, int seq, float* x, int64_t n, int64_t pos0) {
  const ModelConfig& c = model_.config();
  const LayerWeights& l = model_.layer(il);
  const size_t cache = static_cast<size_t>(il * n_seq_ + seq);
  rms_norm_rows(ctx_, x, l.attn_norm, c.norm_eps, n, c.n_embd, xn_.data());
  linear(ctx_, projection(il, 0), xn_.data(), n, q_.data());
  linear(ctx_, projection(il, 1), xn_.data(), n, k_.data());
  linear(ctx_, projection(il, 2), xn_.data(), n, v_.data());
  rope_.apply(q_.data(), n, params_.n_head, params_.head_dim, pos0);
  rope_.apply(k_.data(), n, params_.n_head_kv, params_.head_dim, pos0);
  kv_store(ctx_.isa(), params_, k_.data(), 0, pos0, n, k_cache_[cache].data());
  kv_store(ctx_.isa(), params_, v_.data(), 0, pos0, n, v_cache_[cache].data());
  attention(ctx_, params_, q_.data(), k_cache_[cache].data(), v_cache_[cache].data(), pos0, n,
            att_.data(), workspace_.data());
  linear(ctx_, projection(il, 3), att_.data(), n, out_.data());
  vec_add(ctx_.isa(), x, out_.data(), n * c.n_embd);
}

namespace {

sparse::FfnShape hot_shape(const ModelConfig& c, const LayerWeights& l, int64_t k) {
  sparse::FfnShape s;
  s.n_embd = c.n_embd;
  s.n_ff = k;
  s.max_hidden = l.fc1.rows;
  s.n_batch = sparse::kMaxSparseBatch;
  s.act = to_activation(c.ffn_act);
  s.up_relu = c.ffn_up_relu;
  return s;
}

}  // namespace

HostHotFfn::HostHotFfn(const TestModel& model, int64_t il, const std::vector<int32_t>& hot,
                       SparseMode mode)
    : ctx_(1, cpu::Isa::Scalar),
      executor_(hot_shape(model.config(), model.layer(il), static_cast<int64_t>(hot.size())),
                sparse::FfnMode{mode, false, false, nullptr}) {
  const LayerWeights& l = model.layer(il);
  const auto k = static_cast<int64_t>(hot.size());
  auto rows = [&](const Matrix& m) {
    if (!m.present()) return Matrix{};
    const auto rb = static_cast<size_t>(row_bytes(m.type, m.cols));
    auto& blob = blobs_.emplace_back(hot.size() * rb);
    for (size_t j = 0; j < hot.size(); ++j) std::memcpy(blob.data() + j * rb, m.row(hot[j]), rb);
    return Matrix{m.type, blob.data(), k, m.cols};
  };
  gate_ = rows(l.ffn_gate);
  up_ = rows(l.ffn_up);
  down_t_ = rows(l.ffn_down_t);
  fc2_ = rows(l.fc2);
  if (l.ffn_up_b) {
    for (const int32_t i : hot) up_bias_.push_back(l.ffn_up_b[i]);
  }
  weights_.gate = &gate_;
  weights_.up = &up_;
  weights_.down_t = &down_t_;
  weights_.fc1 = &l.fc1;
  weights_.fc2 = &fc2_;
  weights_.up_bias = l.ffn_up_b ? up_bias_.data() : nullptr;
  weights_.down_bias = nullptr;  // the host adds ffn_down's bias, never the device
  weights_.layer = static_cast<int32_t>(il);
}

void HostHotFfn::run(const float* xn, const float* p, int64_t n, float threshold,
                     float down_threshold, float* out, SparseStats& stats) {
  weights_.threshold = threshold;
  weights_.down_threshold = down_threshold;
  executor_.run(ctx_, weights_, xn, p, n, out, stats);
}

}  // namespace hearth::test
