#include "device/cuda/hot_ffn.h"

#include "device/cuda/activation.cuh"
#include "device/cuda/matmul.cuh"
#include "device/cuda/sparse.cuh"

namespace hearth::gpu {
namespace {

// y[t * ldy + j] = W[row] · x[t] (+ bias[row]) for the rows idx[0 .. *count) (all rows without
// idx).
void matvec(const DeviceMatrix& w, const float* x, int64_t ldx, int64_t n, const int32_t* idx,
            const int32_t* count, const float* bias, float* y, int64_t ldy, cudaStream_t s) {
  launch_matvec({.w = w.view(),
                 .idx = idx,
                 .count_dev = count,
                 .max_count = w.rows,
                 .x = x,
                 .ldx = ldx,
                 .n = n,
                 .bias = bias,
                 .y = y,
                 .ldy = ldy},
                s);
}

void compact(const float* values, int64_t ld, int64_t n, const int32_t* count_dev, int64_t count,
             int32_t* idx_out, int32_t* kept, uint64_t* pairs, cudaStream_t s) {
  launch_compact({.values = values,
                  .ld = ld,
                  .n = n,
                  .count_dev = count_dev,
                  .count = count,
                  .idx_out = idx_out,
                  .kept_out = kept,
                  .pairs_out = pairs},
                 s);
}

bool two_stage(const HotFfnRule& r) {
  return r.layer.mode == SparseMode::Threshold && r.layer.down_threshold > 0.0f;
}

uint64_t rows_bytes(const DeviceMatrix& m, int64_t rows) {
  return m.present() ? static_cast<uint64_t>(rows) * m.row_bytes() : 0;
}

}  // namespace

void enqueue_predictor(const MatrixView& fc1, const MatrixView& fc2, const float* p, int64_t n,
                       float* hidden, float threshold, float* mask, int64_t ld,
                       cudaStream_t stream) {
  launch_dense_matvec(fc1, p, fc1.cols, n, hidden, fc1.rows, false, stream);
  launch_activate(FfnActivation::Relu, hidden, n * fc1.rows, hidden, stream);
  launch_dense_matvec(fc2, hidden, fc1.rows, n, mask, ld, false, stream);
  launch_score_mask(threshold, mask, n, fc2.rows, ld, stream);
}

void enqueue_hot_ffn(const DeviceLayerWeights& l, const HotFfnRule& r, const HotFfnBuffers& b,
                     int64_t n, cudaStream_t s) {
  const int64_t k = l.n_hot, ld = b.ld, n_embd = l.up.cols;
  const bool gated = l.gate.present();
  const float* up_bias = l.up_bias.as<float>();
  int32_t* const k_union = &b.counters->k_union;
  const int32_t* list = b.idx;

  GluArgs glu{.act = r.act,
              .up_relu = r.up_relu,
              .g = gated ? b.g : nullptr,
              .u = b.u,
              .count_dev = k_union,
              .max_count = k,
              .n = n,
              .ld = ld};

  switch (r.layer.mode) {
    case SparseMode::Dense:
      launch_set_count(k_union, static_cast<int32_t>(k), s);
      list = b.iota;
      matvec(l.up, b.xn, n_embd, n, list, k_union, up_bias, b.u, ld, s);
      if (gated) matvec(l.gate, b.xn, n_embd, n, list, k_union, nullptr, b.g, ld, s);
      glu.idx = list;
      launch_glu(glu, s);
      break;
    case SparseMode::Oracle:
    case SparseMode::Threshold:
      // f = act(gate) over every hot neuron, zero where it does not fire; then the firing
      // neurons' up rows, a = up' · f (or f itself without a gate).
      if (gated) {
        matvec(l.gate, b.xn, n_embd, n, nullptr, nullptr, nullptr, b.f, ld, s);
      } else {
        matvec(l.up, b.xn, n_embd, n, nullptr, nullptr, up_bias, b.f, ld, s);
      }
      launch_act_mask(r.act, r.layer.threshold, b.f, n, k, ld, s);
      compact(b.f, ld, n, nullptr, k, b.idx, k_union, &b.counters->pairs, s);
      if (gated) matvec(l.up, b.xn, n_embd, n, b.idx, k_union, up_bias, b.u, ld, s);
      launch_oracle_combine(r.up_relu && gated, gated ? b.u : nullptr, b.f, b.idx, k_union, k, n,
                            ld, b.u, s);
      if (two_stage(r)) {
        // Rows whose every coefficient is now zero are skipped by the axpy: the same sum as
        // the host's dropping them from its list. Counted here for the stats.
        launch_abs_mask(r.layer.down_threshold, b.u, k_union, k, n, ld, s);
        compact(b.u, ld, n, k_union, 0, nullptr, &b.counters->k_down, &b.counters->pairs_down, s);
      }
      break;
    case SparseMode::Predictor:
      enqueue_predictor(l.fc1.view(), l.fc2.view(), b.p, n, b.hidden, r.layer.threshold, b.f, ld,
                        s);
      compact(b.f, ld, n, nullptr, k, b.idx, k_union, &b.counters->pairs, s);
      matvec(l.up, b.xn, n_embd, n, b.idx, k_union, up_bias, b.u, ld, s);
      if (gated) matvec(l.gate, b.xn, n_embd, n, b.idx, k_union, nullptr, b.g, ld, s);
      glu.idx = b.idx;
      glu.mask = b.f;
      launch_glu(glu, s);
      break;
    case SparseMode::Auto:
      break;  // resolved before a session is opened (session_sizes checks)
  }

  launch_axpy({.w_t = l.down_t.view(),
               .idx = list,
               .count_dev = k_union,
               .a = b.u,
               .lda = ld,
               .n = n,
               // ffn_down's bias is the host's to add, once, whatever the split.
               .bias = nullptr,
               .partial = b.partial,
               .y = b.out},
              s);
}

void count_hot_ffn(const DeviceLayerWeights& l, const HotFfnRule& r, const FfnCounters& c,
                   int64_t n, SparseStats& stats) {
  switch (r.layer.mode) {
    case SparseMode::Dense:
      stats.neurons_active += static_cast<uint64_t>(n * l.n_hot);
      stats.weight_bytes += l.gate.bytes() + l.up.bytes() + l.down_t.bytes();  // 0 for no gate
      break;
    case SparseMode::Oracle:
    case SparseMode::Threshold: {
      const bool two = two_stage(r);
      stats.neurons_active += two ? c.pairs_down : c.pairs;
      // Without a gate, up was read in full to decide: its rows are not read again.
      stats.weight_bytes += (l.gate.present() ? l.gate.bytes() + rows_bytes(l.up, c.k_union)
                                              : l.up.bytes()) +
                            rows_bytes(l.down_t, two ? c.k_down : c.k_union);
      break;
    }
    case SparseMode::Predictor:
      stats.neurons_active += c.pairs;
      stats.weight_bytes += l.fc1.bytes() + l.fc2.bytes() + rows_bytes(l.up, c.k_union) +
                            rows_bytes(l.gate, c.k_union) + rows_bytes(l.down_t, c.k_union);
      break;
    case SparseMode::Auto:
      break;
  }
}

}  // namespace hearth::gpu
