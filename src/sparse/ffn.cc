#include "sparse/ffn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "ops/linear.h"
#include "ops/sparse_matmul.h"
#include "ops/vec.h"

namespace hearth::sparse {
namespace {

uint64_t rows_bytes(const Matrix* m, int64_t rows) {
  return m && m->present() ? static_cast<uint64_t>(rows) * row_bytes(m->type, m->cols) : 0;
}

// Y[n, k] = X[n, m.cols] · m[idx]^T
void gather(cpu::CpuContext& ctx, const Matrix& m, const int32_t* idx, int64_t k, const float* x,
            int64_t n, float* y) {
  gather_matmul(ctx, m.type, m.data, m.rows, m.cols, idx, k, x, n, y);
}

// The share of active neurons above which a dense pass over ffn_down is faster than the sparse
// axpy over ffn_down_t, from the kernel micro-benchmarks (bench/sparse_bench.cc against matvec;
// docs/benchmarks.md): the axpy pays for converting weights or coefficients per row, which float
// weights hide behind DRAM but Q8_0 (float axpy) and Q4_0 (8-bit integer sums, one token) do not.
double axpy_crossover(DType t) {
  switch (t) {
    case DType::Q4_0: return 0.35;
    case DType::Q8_0: return 0.4;
    default: return 0.65;
  }
}

}  // namespace

FfnExecutor::FfnExecutor(const FfnShape& s, const FfnMode& m) : shape_(s), mode_(m) {
  const auto per_batch = static_cast<size_t>(s.n_batch * s.n_ff);
  gate_.resize(per_batch);
  up_.resize(per_batch);
  if (m.mode == SparseMode::Predictor) {
    hidden_.resize(static_cast<size_t>(s.n_batch * s.max_hidden));
    score_.resize(per_batch);
  }
  if (m.observer) act_.resize(per_batch);
  idx_.resize(static_cast<size_t>(s.n_ff));
  keep_.resize(static_cast<size_t>(s.n_ff));
  all_.resize(static_cast<size_t>(s.n_ff));
  std::iota(all_.begin(), all_.end(), 0);
}

uint64_t FfnExecutor::buffer_bytes() const {
  const auto f = [](const auto& v) { return static_cast<uint64_t>(v.size() * sizeof(v[0])); };
  return f(gate_) + f(up_) + f(hidden_) + f(score_) + f(idx_) + f(all_) + f(act_) + f(keep_);
}

void FfnExecutor::run(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p,
                      int64_t n, float* out, SparseStats& stats) {
  if (chunks_.size() <= 1 || mode_.mode == SparseMode::Dense) {
    run_group(ctx, w, xn, p, n, out, stats);
    return;
  }
  // Groups of consecutive chunks decided alike: short ones up to kMaxSparseBatch rows together
  // (never split: a chunk's tokens share their neurons as they would alone), long ones all
  // together.
  const int64_t n_embd = shape_.n_embd;
  int64_t t0 = 0;
  for (size_t c = 0; c < chunks_.size();) {
    const bool small = chunks_[c] <= kMaxSparseBatch;
    int64_t tn = 0;
    while (c < chunks_.size() && (chunks_[c] <= kMaxSparseBatch) == small &&
           (!small || tn + chunks_[c] <= kMaxSparseBatch)) {
      tn += chunks_[c++];
    }
    run_group(ctx, w, xn + t0 * n_embd, p + t0 * n_embd, tn, out + t0 * n_embd, stats);
    t0 += tn;
  }
}

void FfnExecutor::run_group(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                            const float* p, int64_t n, float* out, SparseStats& stats) {
  stats.neurons_total += static_cast<uint64_t>(n * shape_.n_ff);
  threshold_ = w.threshold;
  down_threshold_ = w.down_threshold;
  const bool small = n <= kMaxSparseBatch;
  if (w.neurons && !small) {
    fail("FfnExecutor: a neuron subset needs batches of at most ", kMaxSparseBatch, " tokens");
  }
  const SparseMode mode = small || mode_.masked_batches ? mode_.mode : SparseMode::Dense;
  if (mode == SparseMode::Predictor) {
    predict(ctx, w, p, n, stats);
    if (mode_.audit) audit(ctx, w, xn, n, stats);
  }
  // A subset is gathered even in Dense mode: its rows are scattered over the matrices.
  if ((mode != SparseMode::Dense || w.neurons) && small) {
    run_sparse(ctx, w, xn, n, out, stats);
  } else {
    run_dense(ctx, w, xn, p, n, mode, out, stats);
  }
}

// score[n, n_ff] = fc2 · relu(fc1 · p)
void FfnExecutor::predict(cpu::CpuContext& ctx, const FfnWeights& w, const float* p, int64_t n,
                          SparseStats& stats) {
  linear(ctx, *w.fc1, p, n, hidden_.data());
  activate(ctx.isa(), Activation::Relu, hidden_.data(), n * w.fc1->rows, hidden_.data());
  linear(ctx, *w.fc2, hidden_.data(), n, score_.data());
  stats.weight_bytes += w.fc1->bytes() + w.fc2->bytes();
}

// Counts the neurons that truly fire (non-zero activation of the gate, or of up without a gate)
// and those of them the predictor caught. Measurement only: its weight reads are not counted.
void FfnExecutor::audit(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                        SparseStats& stats) {
  const int64_t n_ff = shape_.n_ff;
  float* g = gate_.data();
  if (w.gate && w.gate->present()) {
    linear(ctx, *w.gate, xn, n, g);
  } else {
    up_all(ctx, w, xn, n, g);
  }
  activate(ctx.isa(), shape_.act, g, n * n_ff, g);
  for (int64_t i = 0; i < n * n_ff; ++i) {
    if (g[i] != 0.0f) {
      ++stats.audit_true;
      if (score_[i] >= threshold_) ++stats.audit_hit;
    }
  }
}

void FfnExecutor::run_dense(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                            const float* p, int64_t n, SparseMode mode, float* out,
                            SparseStats& stats) {
  const int64_t n_ff = shape_.n_ff;
  const int64_t total = n * n_ff;
  float* const a = gate_.data();
  float* const u = up_.data();
  if (w.gate && w.gate->present()) {
    linear_shared(ctx, {{w.up, u}, {w.gate, a}}, xn, n);
  } else {
    linear(ctx, *w.up, xn, n, u);
  }
  add_bias(ctx.isa(), u, w.up_bias, n, n_ff);
  stats.weight_bytes += rows_bytes(w.gate, n_ff) + rows_bytes(w.up, n_ff);
  dense_activations(ctx, w, p, n, mode, a, u, stats);
  if (mode == SparseMode::Predictor) {
    uint64_t active = 0;
    for (int64_t i = 0; i < total; ++i) {
      if (score_[i] >= threshold_) {
        ++active;
      } else {
        a[i] = 0.0f;
      }
    }
    stats.neurons_active += active;
  } else if (mode == SparseMode::Dense) {
    stats.neurons_active += static_cast<uint64_t>(total);
  }
  down_all(ctx, w, a, n, out, stats);
}

// a[n, n_ff] = act(gate) ⊙ up (or act(up)) from the pre-activations in a (gate) and u (up).
// Oracle, Threshold and the observer need act(gate) on its own before the product, so they
// take two passes; the plain dense path fuses them (glu).
void FfnExecutor::dense_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* p,
                                    int64_t n, SparseMode mode, float* a, float* u,
                                    SparseStats& stats) {
  const int64_t total = n * shape_.n_ff;
  const bool gated = w.gate && w.gate->present();
  const bool decide = mode == SparseMode::Oracle || mode == SparseMode::Threshold;
  if (gated && shape_.up_relu) activate(ctx.isa(), Activation::Relu, u, total, u);
  if (!decide && !mode_.observer) {
    if (gated) {
      glu(ctx, shape_.act, a, u, total, a);
    } else {
      activate(ctx.isa(), shape_.act, u, total, a);
    }
    return;
  }
  activate(ctx.isa(), shape_.act, gated ? a : u, total, a);
  if (mode_.observer) copy_in_file_order(w, a, n, act_.data());
  int64_t kept = decide ? mask_below(a, total, threshold_) : 0;
  if (gated) vec_mul(ctx.isa(), a, u, total);
  if (mode == SparseMode::Threshold && down_threshold_ > 0.0f) {
    kept = mask_below(a, total, down_threshold_);
  }
  if (decide) stats.neurons_active += static_cast<uint64_t>(kept);
  // u is free once multiplied in.
  if (mode_.observer) {
    mode_.observer->observe(w.layer, n, p, act_.data(), in_file_order(w, a, n, u));
  }
}

// dst[n, n_ff] = a with its columns in the file's neuron order.
void FfnExecutor::copy_in_file_order(const FfnWeights& w, const float* a, int64_t n,
                                     float* dst) const {
  const int64_t n_ff = shape_.n_ff;
  if (!w.order) {
    std::copy(a, a + n * n_ff, dst);
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < n_ff; ++j) dst[t * n_ff + w.order[j]] = a[t * n_ff + j];
  }
}

// a[n, n_ff] in the file's neuron order: a itself when the rows are held in that order, else
// scattered into dst.
const float* FfnExecutor::in_file_order(const FfnWeights& w, const float* a, int64_t n,
                                        float* dst) const {
  if (!w.order) return a;
  copy_in_file_order(w, a, n, dst);
  return dst;
}

// Zeroes the activations whose magnitude is at most the threshold (at 0: keeps exactly the
// non-zero ones) and returns how many are left.
int64_t FfnExecutor::mask_below(float* act, int64_t n, float threshold) {
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(act[i]) > threshold) {
      ++kept;
    } else {
      act[i] = 0.0f;
    }
  }
  return kept;
}

// out[n, n_embd] = a[n, n_ff] · down^T, through whichever layout the file has.
void FfnExecutor::down_all(cpu::CpuContext& ctx, const FfnWeights& w, const float* a, int64_t n,
                           float* out, SparseStats& stats) {
  const int64_t n_ff = shape_.n_ff, n_embd = shape_.n_embd;
  if (w.down && w.down->present()) {
    // a is gate_ (run_dense), so up_ is free.
    linear(ctx, *w.down, in_file_order(w, a, n, up_.data()), n, out);
    stats.weight_bytes += w.down->bytes();
  } else {
    // Only the neuron-major matrix: an axpy over every neuron, a few tokens at a time so their
    // output rows stay in cache while each weight row is converted once per group.
    const Matrix& dt = *w.down_t;
    for (int64_t t0 = 0; t0 < n; t0 += kMaxSparseBatch) {
      const int64_t tn = std::min(kMaxSparseBatch, n - t0);
      sparse_axpy(ctx, dt.type, dt.data, dt.rows, dt.cols, all_.data(), n_ff, a + t0 * n_ff, tn,
                  out + t0 * n_embd);
    }
    stats.weight_bytes += dt.bytes();
  }
  add_bias(ctx.isa(), out, w.down_bias, n, n_embd);
}

// u[n, n_ff] = up · xn (+ bias)
void FfnExecutor::up_all(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                         float* u) {
  linear(ctx, *w.up, xn, n, u);
  add_bias(ctx.isa(), u, w.up_bias, n, shape_.n_ff);
}

// u[n, k] = up[idx] · xn (+ bias[idx])
void FfnExecutor::up_gather(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                            int64_t k, float* u) {
  gather(ctx, *w.up, idx_.data(), k, xn, n, u);
  add_up_bias(w, n, k, u);
}

// u[n, k] += bias[idx]
void FfnExecutor::add_up_bias(const FfnWeights& w, int64_t n, int64_t k, float* u) const {
  if (!w.up_bias) return;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) u[t * k + j] += w.up_bias[idx_[j]];
  }
}


// Whether neuron i fires for token t: a non-zero activation in `full` (oracle), a predictor
// score at the threshold, or always (Dense, which only gets here with a neuron subset).
bool FfnExecutor::fires(const float* full, int64_t t, int64_t i) const {
  const int64_t at = t * shape_.n_ff + i;
  if (full) return full[at] != 0.0f;
  return mode_.mode == SparseMode::Dense || score_[at] >= threshold_;
}

// Compacts the candidates (w's subset, else all neurons) that fire for any of the n tokens into
// idx_ (ascending) and returns how many; counts each token's own active neurons into stats (when
// given).
int64_t FfnExecutor::select_active(cpu::Isa isa, const FfnWeights& w, const float* full,
                                   int64_t n, SparseStats* stats) {
  const int32_t* cand = w.neurons ? w.neurons : all_.data();
  const int64_t n_cand = w.neurons ? w.n_neurons : shape_.n_ff;
  int64_t k = 0;
  uint64_t active = 0;
  if (n == 1 && mode_.mode == SparseMode::Predictor) {
    // One token's predictor decision (full is null in this mode), the common decode step:
    // branch-free, since the outcomes are random and a branch per neuron would mispredict about
    // as often as it fires; over all neurons the vector kernel (select_at_least) does better
    // still.
    if (!w.neurons) {
      k = select_at_least(isa, score_.data(), n_cand, threshold_, idx_.data());
    } else {
      const float* score = score_.data();
      const float thr = threshold_;
      for (int64_t c = 0; c < n_cand; ++c) {
        idx_[k] = cand[c];
        k += score[cand[c]] >= thr ? 1 : 0;
      }
    }
    if (stats) stats->neurons_active += static_cast<uint64_t>(k);
    return k;
  }
  for (int64_t c = 0; c < n_cand; ++c) {
    const int32_t i = cand[c];
    int64_t hits = 0;
    for (int64_t t = 0; t < n; ++t) hits += fires(full, t, i) ? 1 : 0;
    if (hits) idx_[k++] = i;
    active += static_cast<uint64_t>(hits);
  }
  if (stats) stats->neurons_active += active;
  return k;
}

// g[n, n_ff] = act(gate · xn) (or act(up · xn)) over w's neuron subset, zero elsewhere: the
// oracle's full activations without reading the rows a device computes.
void FfnExecutor::subset_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                                     int64_t n, float* g) {
  const int64_t n_ff = shape_.n_ff, kc = w.n_neurons;
  const bool gated = w.gate && w.gate->present();
  float* const tmp = up_.data();  // [n, kc]; up_ is free until the activations are gathered
  gather(ctx, gated ? *w.gate : *w.up, w.neurons, kc, xn, n, tmp);
  if (!gated && w.up_bias) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < kc; ++j) tmp[t * kc + j] += w.up_bias[w.neurons[j]];
    }
  }
  activate(ctx.isa(), shape_.act, tmp, n * kc, tmp);
  std::fill(g, g + n * n_ff, 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < kc; ++j) g[t * n_ff + w.neurons[j]] = tmp[t * kc + j];
  }
}

// Drops from idx_ and a[n, k] (in place; rows become [n, k'] with k' the result) the neurons
// whose activation is zero for every token, and counts the non-zero (token, neuron) pairs left
// into active.
int64_t FfnExecutor::drop_zero_columns(float* a, int64_t n, int64_t k, uint64_t& active) {
  int64_t kept = 0;
  for (int64_t j = 0; j < k; ++j) {
    int64_t hits = 0;
    for (int64_t t = 0; t < n; ++t) hits += a[t * k + j] != 0.0f ? 1 : 0;
    keep_[static_cast<size_t>(j)] = hits > 0;
    active += static_cast<uint64_t>(hits);
    if (hits) idx_[kept++] = idx_[j];
  }
  // Destinations never run ahead of sources (t * kept + out <= t * k + j), so one forward pass.
  for (int64_t t = 0; t < n; ++t) {
    int64_t out = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (keep_[static_cast<size_t>(j)]) a[t * kept + out++] = a[t * k + j];
    }
  }
  return kept;
}

void FfnExecutor::run_sparse(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                             int64_t n, float* out, SparseStats& stats) {
  const bool gated = w.gate && w.gate->present();
  const cpu::Isa isa = ctx.isa();
  float* const g = gate_.data();
  float* const u = up_.data();

  // Oracle, Threshold: the activations of the gate (or of up, without a gate) in full,
  // [n, n_ff], those at or below the threshold zeroed.
  const float* full = nullptr;
  if (mode_.mode == SparseMode::Oracle || mode_.mode == SparseMode::Threshold) {
    if (w.neurons) {
      subset_activations(ctx, w, xn, n, g);
      stats.weight_bytes += rows_bytes(gated ? w.gate : w.up, w.n_neurons);
    } else {
      if (gated) {
        linear(ctx, *w.gate, xn, n, g);
      } else {
        up_all(ctx, w, xn, n, g);
      }
      activate(isa, shape_.act, g, n * shape_.n_ff, g);
      stats.weight_bytes += (gated ? w.gate : w.up)->bytes();
    }
    if (threshold_ > 0.0f) mask_below(g, n * shape_.n_ff, threshold_);
    full = g;
  }
  // Threshold counts the neurons that reach the down projection, below.
  const bool two_stage = mode_.mode == SparseMode::Threshold && down_threshold_ > 0.0f;
  int64_t k = select_active(isa, w, full, n, two_stage ? nullptr : &stats);

  // a[n, k] in `u`: the activations of the active neurons, each token keeping only its own.
  if (full) {
    oracle_activations(ctx, w, xn, full, n, k, u);
  } else {
    predicted_activations(ctx, w, xn, n, k, u, stats);
  }
  stats.weight_bytes += rows_bytes(w.up, k);
  if (two_stage) {
    mask_below(u, n * k, down_threshold_);
    k = drop_zero_columns(u, n, k, stats.neurons_active);
  }
  down_sparse(ctx, w, u, n, k, out, stats);
}

// a[t, j] = act(gate)[t, idx_j] · up[t, idx_j] (or act(up) without a gate), from the oracle's
// full activations; inactive neurons are zero there already.
void FfnExecutor::oracle_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                                     const float* full, int64_t n, int64_t k, float* u) {
  const int64_t n_ff = shape_.n_ff;
  const int32_t* idx = idx_.data();
  if (w.gate && w.gate->present()) {
    up_gather(ctx, w, xn, n, k, u);
    if (shape_.up_relu) activate(ctx.isa(), Activation::Relu, u, n * k, u);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) u[t * k + j] *= full[t * n_ff + idx[j]];
    }
  } else {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) u[t * k + j] = full[t * n_ff + idx[j]];
    }
  }
}

// a[t, j] for the predicted neurons: up and gate gathered over the union of the tokens' sets,
// then each token's neurons that its own predictor did not pick zeroed.
void FfnExecutor::predicted_activations(cpu::CpuContext& ctx, const FfnWeights& w,
                                        const float* xn, int64_t n, int64_t k, float* u,
                                        SparseStats& stats) {
  const bool gated = w.gate && w.gate->present();
  const int32_t* idx = idx_.data();
  float* const g = gate_.data();
  if (gated && w.gate->type == w.up->type) {
    gather_matmul2(ctx, w.up->type, w.up->data, w.gate->data, w.up->rows, w.up->cols, idx, k, xn,
                   n, u, g);
    add_up_bias(w, n, k, u);
  } else {
    up_gather(ctx, w, xn, n, k, u);
    if (gated) gather(ctx, *w.gate, idx, k, xn, n, g);
  }
  if (gated) {
    if (shape_.up_relu) activate(ctx.isa(), Activation::Relu, u, n * k, u);
    glu(ctx, shape_.act, g, u, n * k, u);
  } else {
    activate(ctx.isa(), shape_.act, u, n * k, u);
  }
  if (n > 1 && mode_.mode != SparseMode::Dense) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        if (!fires(nullptr, t, idx[j])) u[t * k + j] = 0.0f;
      }
    }
  }
  stats.weight_bytes += rows_bytes(w.gate, k);
}

// out[n, n_embd] = Σ_j a[t, j] · down_t[idx_j]  (+ bias)
void FfnExecutor::down_sparse(cpu::CpuContext& ctx, const FfnWeights& w, const float* a, int64_t n,
                              int64_t k, float* out, SparseStats& stats) {
  const int64_t n_ff = shape_.n_ff;
  const int32_t* idx = idx_.data();
  const Matrix& dt = *w.down_t;
  // Oracle mode over a quantized ffn_down reads it as dense decoding does: the dense product
  // rounds the activations to 8 bits per block before meeting the weights, which no
  // neuron-major copy can reproduce, and the oracle is the exact reference (its skipped neurons
  // are exact zeros, so the result is the dense one bit for bit).
  const bool as_dense = w.down && w.down->present() &&
                        ((mode_.mode == SparseMode::Oracle && dtype_block_size(w.down->type) > 1) ||
                         k > axpy_crossover(dt.type) * n_ff);
  if (as_dense) {
    // Dense enough that streaming all of ffn_down beats the axpy (or the oracle above): scatter
    // a into a full, mostly zero activation vector per token.
    float* const full = gate_.data();
    std::fill(full, full + n * n_ff, 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        full[t * n_ff + (w.order ? w.order[idx[j]] : idx[j])] = a[t * k + j];
      }
    }
    linear(ctx, *w.down, full, n, out);
    stats.weight_bytes += w.down->bytes();
  } else {
    sparse_axpy(ctx, dt.type, dt.data, dt.rows, dt.cols, idx, k, a, n, out);
    stats.weight_bytes += rows_bytes(&dt, k);
  }
  add_bias(ctx.isa(), out, w.down_bias, n, shape_.n_embd);
}

}  // namespace hearth::sparse
