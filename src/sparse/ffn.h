// The FFN block of every architecture, dense or activation-sparse (DESIGN.md section 5):
//
//   a   = act(gate · x) ⊙ up · x        (gated; dReLU also applies act to up)  or  act(up · x)
//   out = down · a                     computed as Σ_i a_i · down_t[i]  over the active neurons i
//
// The executor is a rule and a pipeline: the mode's NeuronRule (neuron_rule.h) decides, for a
// group of tokens, which neurons run; the mode-agnostic pipeline (ffn_pipeline.h) then computes
// them. Decode steps of up to kMaxSparseBatch tokens take the neuron-aware path (gathered rows,
// down as an axpy over the neuron-major rows, each token keeping only its own neurons). Larger
// batches (prompts) compute up and gate with the dense matrix-matrix kernels; with
// masked_batches (SessionOptions::sparse_prompt, resolved by the session) they apply each token's
// mask and take each token's down projection as a decode step of it alone does, so every token's
// result is the same bits in any batch. Without it they run the dense FFN (PowerInfer's prefill).
//
// A batch of several sequences (set_chunks) is decided chunk by chunk, as each would be alone: in
// the sparse modes, runs of short chunks (decode steps) share the sparse path in groups of up to
// kMaxSparseBatch tokens and long chunks and dense ones (prompts) take the dense path together.
// Dense mode runs the whole batch as one product, whose rows equal the products of each row
// alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "backend/cpu/context.h"
#include "sparse/ffn_scratch.h"
#include "sparse/ffn_types.h"
#include "sparse/neuron_rule.h"

namespace hearth::sparse {

// One session's (or one device layer's) FFN: the mode's rule, the buffers, sized once (run()
// never allocates).
class FfnExecutor {
 public:
  FfnExecutor(const FfnShape& shape, const FfnMode& mode);

  // The rows of the following run() calls come in these chunks (one per sequence, in row order,
  // their rows summing to run()'s n). Not copied: `chunks` must outlive those calls. Empty (the
  // default): one chunk, not dense.
  void set_chunks(std::span<const FfnChunk> chunks) { chunks_ = chunks; }

  // out[n, n_embd] = FFN(xn[n, n_embd]); p[n, n_embd] is the predictor's input (for Llama the
  // residual stream before ffn_norm). Adds this run's neurons and FFN weight bytes to `stats`
  // (not `tokens`, which the caller counts once per forward pass).
  void run(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p, int64_t n,
           float* out, SparseStats& stats);

  // Bytes of the buffers it holds (a device that runs it charges them to its memory).
  uint64_t buffer_bytes() const { return FfnScratch::bytes(shape_, mode_); }

 private:
  // run() for rows that are decided together: `small` (n <= kMaxSparseBatch) ones as decode
  // steps, the others as a prompt (masked_batches says how).
  void run_group(cpu::CpuContext& ctx, const FfnWeights& w, const float* xn, const float* p,
                 int64_t n, bool small, float* out, SparseStats& stats);
  // Threshold mode: xn[n, n_embd] with the elements at or below the layer's input threshold
  // zeroed (into scratch; xn itself without one), each row compacted for the input-major copies
  // where the batch reads them (input_sparse_reads_copy), and the gate/up weights they skip
  // counted.
  const float* threshold_input(const FfnWeights& w, const float* xn, int64_t n, SparseStats& stats);

  FfnShape shape_;
  FfnMode mode_;
  std::unique_ptr<NeuronRule> rule_;        // the mode's
  std::unique_ptr<NeuronRule> dense_rule_;  // for prompt batches unless masked_batches
  FfnScratch scratch_;
  std::span<const FfnChunk> chunks_;  // set_chunks()
};

}  // namespace hearth::sparse
