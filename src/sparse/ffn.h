// The FFN block of every architecture, dense or activation-sparse (DESIGN.md section 5):
//
//   a   = act(gate · x) ⊙ up · x        (gated; dReLU also applies act to up)  or  act(up · x)
//   out = down · a                     computed as Σ_i a_i · down_t[i]  over the active neurons i
//
// Which neurons are active depends on the mode: all (Dense), those with a non-zero activation
// (Oracle: the gate, or up when there is no gate, is computed in full first), those whose
// activation's magnitude exceeds the layer's calibrated threshold (Threshold: the same pass as
// Oracle with a threshold above zero, then a second one on act(gate) · up that also drops down
// rows), or those whose predictor score fc2 · relu(fc1 · p) reaches the layer's threshold
// (Predictor). Skipped neurons contribute exactly zero, so a mode
// changes which terms are summed, never how.
//
// Decode steps of up to kMaxSparseBatch tokens take the neuron-aware path: the union of the
// tokens' active sets is compacted into one index list, up/gate rows are gathered, down is an
// axpy over the neuron-major rows, and each token keeps only its own neurons. Larger batches
// (prompts) run the dense matrix-matrix kernels, so prompt speed does not regress; with
// masked_batches they also apply the same per-token masks, and compute the same function as the
// sparse path (perplexity measures a mode that way).
//
// A batch of several sequences (set_chunks) is decided chunk by chunk, as each would be alone: in
// the sparse modes, runs of short chunks (decode steps) share the sparse path in groups of up to
// kMaxSparseBatch tokens and long chunks (prompts) take the dense path together. Dense mode runs
// the whole batch as one product, whose rows equal the products of each row alone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/context.h"
#include "hearth/session.h"
#include "core/weight_views.h"
#include "ops/activation.h"

namespace hearth::sparse {

inline constexpr int64_t kMaxSparseBatch = 8;

// The matrices of one layer's FFN. down_t (neuron-major) is required by the sparse modes and by
// files without ffn_down; down is used for matrix-matrix batches when present.
struct FfnWeights {
  const Matrix* gate = nullptr;    // [n_ff, n_embd] or absent
  const Matrix* up = nullptr;      // [n_ff, n_embd]
  const Matrix* down = nullptr;    // [n_embd, n_ff] or absent
  const Matrix* down_t = nullptr;  // [n_ff, n_embd] or absent
  const Matrix* fc1 = nullptr;     // [H, n_embd]  (Predictor mode)
  const Matrix* fc2 = nullptr;     // [n_ff, H]
  const float* up_bias = nullptr;    // [n_ff]   (OPT) or absent
  const float* down_bias = nullptr;  // [n_embd] (OPT) or absent
  int32_t layer = 0;                 // for the observer
  // Predictor: a neuron is active iff its score >= threshold. Threshold (and Oracle, at 0): iff
  // |activation| > threshold.
  float threshold = 0.0f;
  // Threshold: of the active neurons, those with |act(gate) · up| <= down_threshold skip their
  // down row too (TEAL's rule for the down projection's input).
  float down_threshold = 0.0f;
  // The neurons this executor may compute (ascending ids), when a device computes the others
  // (hybrid execution: these are the layer's cold neurons); nullptr: all n_ff. Only for runs of
  // at most kMaxSparseBatch tokens. The decisions per neuron are the mode's, as without a subset.
  const int32_t* neurons = nullptr;
  int64_t n_neurons = 0;
  // [n_ff] the file's id of the neuron in each row of gate, up, down_t and fc2 when those are
  // held most-active first (model/neuron_order.h), or null. Neuron ids here (idx, neurons, masks)
  // are row positions; down, which keeps the file's column order, and the observer, which
  // reports by file id, get their activations through it.
  const int32_t* order = nullptr;
};

struct FfnShape {
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t max_hidden = 0;  // widest predictor hidden layer
  int64_t n_batch = 1;     // most tokens per run()
  Activation act = Activation::Silu;
  bool up_relu = false;    // dReLU
};

struct FfnMode {
  SparseMode mode = SparseMode::Dense;  // never Auto here
  bool audit = false;  // Predictor: also compute the true activations and count hits
  bool masked_batches = false;  // batches above kMaxSparseBatch apply the mode too (else dense)
  FfnObserver* observer = nullptr;  // Dense only: sees every layer's activations
};

// Buffers for one session's FFN, sized once: run() never allocates.
class FfnExecutor {
 public:
  FfnExecutor(const FfnShape& shape, const FfnMode& mode);

  // The rows of the following run() calls come in chunks of these lengths (one per sequence, in
  // row order, summing to run()'s n). Not copied: `rows` must outlive those calls. Empty (the
  // default): one chunk.
  void set_chunks(std::span<const int64_t> rows) { chunks_ = rows; }

  // out[n, n_embd] = FFN(xn[n, n_embd]); p[n, n_embd] is the predictor's input (for Llama the
  // residual stream before ffn_norm). Adds this run's neurons and FFN weight bytes to `stats`
  // (not `tokens`, which the caller counts once per forward pass).
  void run(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p, int64_t n,
           float* out, SparseStats& stats);

  // Bytes of the buffers it holds (a device that runs it charges them to its memory).
  uint64_t buffer_bytes() const;

 private:
  // run() for rows that are decided together: sparse when n <= kMaxSparseBatch.
  void run_group(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p,
                 int64_t n, float* out, SparseStats& stats);
  void run_dense(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p,
                 int64_t n, SparseMode mode, float* out, SparseStats& stats);
  void dense_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* p, int64_t n,
                         SparseMode mode, float* a, float* u, SparseStats& stats);
  static int64_t mask_below(float* act, int64_t n, float threshold);
  int64_t drop_zero_columns(float* a, int64_t n, int64_t k, uint64_t& active);
  void run_sparse(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                  float* out, SparseStats& stats);
  void predict(cpu::CpuContext& ctx, const FfnWeights& w, const float* p, int64_t n,
               SparseStats& stats);
  void audit(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
             SparseStats& stats);
  void down_all(cpu::CpuContext& ctx, const FfnWeights& w, const float* a, int64_t n, float* out,
                SparseStats& stats);
  void copy_in_file_order(const FfnWeights& w, const float* a, int64_t n, float* dst) const;
  const float* in_file_order(const FfnWeights& w, const float* a, int64_t n, float* dst) const;
  void up_all(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n, float* u);
  void up_gather(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                 int64_t k, float* u);
  void add_up_bias(const FfnWeights& w, int64_t n, int64_t k, float* u) const;
  bool fires(const float* full, int64_t t, int64_t i) const;
  int64_t select_active(cpu::Isa isa, const FfnWeights& w, const float* full, int64_t n,
                        SparseStats* stats);
  void subset_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                          float* g);
  void oracle_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn,
                          const float* full, int64_t n, int64_t k, float* u);
  void predicted_activations(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, int64_t n,
                             int64_t k, float* u, SparseStats& stats);
  void down_sparse(cpu::CpuContext& ctx, const FfnWeights& w, const float* a, int64_t n, int64_t k,
                   float* out, SparseStats& stats);

  FfnShape shape_;
  FfnMode mode_;
  float threshold_ = 0.0f;       // the current layer's (FfnWeights::threshold)
  float down_threshold_ = 0.0f;  // and FfnWeights::down_threshold
  std::span<const int64_t> chunks_;  // set_chunks()
  std::vector<float> gate_;    // [n_batch, n_ff]   gate (or up) pre-activations; then a
  std::vector<float> up_;      // [n_batch, n_ff]
  std::vector<float> hidden_;  // [kMaxSparseBatch or n_batch, max_hidden]
  std::vector<float> score_;   // [n_batch, n_ff]   predictor scores
  std::vector<int32_t> idx_;   // [n_ff]            active neurons (union over tokens), ascending
  std::vector<int32_t> all_;   // [n_ff]            0, 1, ..., n_ff - 1
  std::vector<float> act_;     // [n_batch, n_ff]   act(gate) for the observer
  std::vector<uint8_t> keep_;  // [n_ff]
};

}  // namespace hearth::sparse
