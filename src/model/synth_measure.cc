#include "model/synth_measure.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "model/config.h"
#include "model/synth_internal.h"
#include "model/weights.h"
#include "ops/attention_block.h"

namespace hearth {

NeuronCounts& NeuronCounts::operator+=(const NeuronCounts& o) {
  neurons += o.neurons;
  active += o.active;
  predicted += o.predicted;
  hit += o.hit;
  return *this;
}

namespace {

// Runs fn(begin, end) over [0, n) split into one contiguous range per thread.
template <typename Fn>
void parallel_rows(int64_t n, int n_threads, Fn fn) {
  const int64_t t = std::max<int64_t>(1, std::min<int64_t>(n_threads, n));
  if (t == 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < t; ++i) pool.emplace_back(fn, n * i / t, n * (i + 1) / t);
  for (auto& th : pool) th.join();
}

// y[n, m.rows] = x[n, m.cols] · m^T, in f32 from the dequantized rows. For Q8_0/Q4_0 matrices the
// activations are first rounded through Q8_0, as the engine's (and ggml's) kernels do.
void linear(const Matrix& m, const float* x, int64_t n, float* y, int n_threads) {
  const int64_t cols = m.cols, rows = m.rows;
  const bool quant_act = m.type == DType::Q8_0 || m.type == DType::Q4_0;
  std::vector<float> xt(static_cast<size_t>(cols * n));  // transposed: xt[j * n + t]
  std::vector<uint8_t> q(quant_act ? static_cast<size_t>(row_bytes(DType::Q8_0, cols)) : 0);
  std::vector<float> xr(static_cast<size_t>(cols));
  for (int64_t t = 0; t < n; ++t) {
    const float* src = x + t * cols;
    if (quant_act) {
      quantize_row(DType::Q8_0, src, q.data(), cols);
      dequantize_row(DType::Q8_0, q.data(), xr.data(), cols);
      src = xr.data();
    }
    for (int64_t j = 0; j < cols; ++j) xt[j * n + t] = src[j];
  }
  parallel_rows(rows, n_threads, [&](int64_t r0, int64_t r1) {
    std::vector<float> w(static_cast<size_t>(cols)), acc(static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(m.type, m.row(r), w.data(), cols);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < cols; ++j) {
        const float wj = w[j];
        if (wj == 0.0f) continue;
        const float* xj = xt.data() + j * n;
        for (int64_t t = 0; t < n; ++t) acc[t] += wj * xj[t];
      }
      for (int64_t t = 0; t < n; ++t) y[t * rows + r] = acc[t];
    }
  });
}

void rms_norm(const float* x, const float* w, float eps, int64_t n_rows, int64_t n, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = xr[i] * scale * w[i];
  }
}

std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab, uint64_t seed) {
  synth_detail::Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& id : t) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(n_vocab)));
  return t;
}

}  // namespace

std::vector<NeuronCounts> reference_forward(const std::string& path,
                                            std::span<const int32_t> tokens, int n_threads,
                                            std::vector<float>* logits,
                                            std::vector<std::vector<uint32_t>>* fires) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto file = gguf::GgufFile::open(path);
  ModelConfig c = read_config(*file);
  const Weights w = bind_weights(*file, c);
  if (c.arch != "llama" || !c.ffn_gated || c.ffn_act != FfnActivation::Relu || c.ffn_up_relu ||
      c.norm != NormType::Rms || c.rope_type != RopeType::Normal) {
    fail(path, ": the reference forward needs a llama model with a gated ReLU (ReGLU) FFN");
  }
  const int64_t n = static_cast<int64_t>(tokens.size()), d = c.n_embd, n_ff = c.n_ff;
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_embd_kv();
  for (const int32_t id : tokens) {
    if (id < 0 || id >= c.n_vocab) fail(path, ": token id ", id, " is out of range");
  }
  auto buf = [](int64_t size) { return std::vector<float>(static_cast<size_t>(size)); };
  std::vector<float> x = buf(n * d), xn = buf(n * d), q = buf(n * q_dim), k = buf(n * kv_dim),
                     v = buf(n * kv_dim), att = buf(n * q_dim), gate = buf(n * n_ff),
                     up = buf(n * n_ff), out = buf(n * d);
  // The attention half is the engine's one implementation (ops/attention_block) on a scalar
  // context with an f32 cache: what this reference checks independently is the FFN. Every layer
  // stores all n positions before attending, so one cache pair serves them all.
  cpu::CpuContext actx(n_threads, cpu::Isa::Scalar);
  const AttentionParams ap = attention_params(c, n, KvType::F32);
  const RopeTable rope(rope_params(c, n), n);
  AlignedBuffer k_cache(kv_cache_bytes(ap)), v_cache(kv_cache_bytes(ap));
  AlignedBuffer workspace(attention_workspace_bytes(ap, actx.n_threads()));
  const AttentionScratch s{xn.data(),  q.data(),   k.data(),        v.data(),
                           att.data(), out.data(), workspace.data()};
  const AttentionChunk chunk{0, n, 0, k_cache.data(), v_cache.data()};
  for (int64_t t = 0; t < n; ++t) {
    dequantize_row(w.token_embd.type, w.token_embd.row(tokens[t]), x.data() + t * d, d);
  }
  std::vector<NeuronCounts> counts(static_cast<size_t>(c.n_layer));
  if (fires)
    fires->assign(static_cast<size_t>(c.n_layer), std::vector<uint32_t>(static_cast<size_t>(n_ff)));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = w.layers[static_cast<size_t>(il)];
    attention_residual(actx, c, ap, rope, l, {&chunk, 1}, s, x.data(), n);

    // FFN; the predictor reads x (the residual stream) before ffn_norm.
    rms_norm(x.data(), l.ffn_norm, c.norm_eps, n, d, xn.data());
    linear(l.ffn_gate, xn.data(), n, gate.data(), n_threads);
    linear(l.ffn_up, xn.data(), n, up.data(), n_threads);
    NeuronCounts& nc = counts[static_cast<size_t>(il)];
    nc.neurons += static_cast<uint64_t>(n * n_ff);
    std::vector<float> score;
    if (l.has_predictor()) {
      std::vector<float> hidden = buf(n * l.fc1.rows);
      score = buf(n * n_ff);
      linear(l.fc1, x.data(), n, hidden.data(), n_threads);
      for (float& h : hidden) h = std::max(h, 0.0f);
      linear(l.fc2, hidden.data(), n, score.data(), n_threads);
    }
    for (int64_t i = 0; i < n * n_ff; ++i) {
      const bool active = gate[i] > 0.0f;
      const bool predicted = !score.empty() && score[i] >= c.sparse_threshold;
      nc.active += active;
      nc.predicted += predicted;
      nc.hit += active && predicted;
      if (fires && active) ++(*fires)[static_cast<size_t>(il)][static_cast<size_t>(i % n_ff)];
      gate[i] = active ? gate[i] * up[i] : 0.0f;
    }
    if (l.ffn_down.present()) {
      linear(l.ffn_down, gate.data(), n, out.data(), n_threads);
    } else {
      // Neuron-major down: out[t] = sum_i a[t, i] * down_t[i].
      std::fill(out.begin(), out.end(), 0.0f);
      std::vector<float> row = buf(d);
      for (int64_t i = 0; i < n_ff; ++i) {
        dequantize_row(l.ffn_down_t.type, l.ffn_down_t.row(i), row.data(), d);
        for (int64_t t = 0; t < n; ++t) {
          const float a = gate[t * n_ff + i];
          if (a == 0.0f) continue;
          for (int64_t j = 0; j < d; ++j) out[t * d + j] += a * row[j];
        }
      }
    }
    for (int64_t i = 0; i < n * d; ++i) x[i] += out[i];
  }
  if (logits) {
    rms_norm(x.data(), w.output_norm, c.norm_eps, n, d, xn.data());
    logits->assign(static_cast<size_t>(n * c.n_vocab), 0.0f);
    linear(w.output, xn.data(), n, logits->data(), n_threads);
  }
  return counts;
}

SynthSparsityReport measure_synth_sparsity(const std::string& path, int64_t n_tokens, uint64_t seed,
                                           int n_threads) {
  if (n_tokens <= 0) fail("synth: the number of tokens to measure on must be positive");
  const auto model = Model::load(path);
  if (!model->has_predictors()) fail(path, ": the model has no predictors to measure");
  const std::vector<int32_t> tokens = random_tokens(n_tokens, model->config().n_vocab, seed);

  SynthSparsityReport r;
  r.n_tokens = n_tokens;
  r.layers = reference_forward(path, tokens, n_threads);
  for (const NeuronCounts& l : r.layers) r.total += l;

  SessionOptions so;
  so.n_threads = n_threads;
  so.n_ctx = static_cast<int32_t>(std::max<int64_t>(n_tokens, 16));
  so.sparse = SparseMode::Predictor;
  so.sparse_audit = true;
  Session session(model, so);
  for (const int32_t id : tokens) session.eval({&id, 1});  // one at a time: the decode path
  r.runtime = session.sparse_stats();
  r.runtime_measured = r.runtime.neurons_total > 0;
  return r;
}

}  // namespace hearth
