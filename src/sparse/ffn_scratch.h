// The buffers of one FFN executor, sized once so that a run never allocates. Each holds one thing
// (a buffer may go from products to their activations in place, never to something unrelated).
// Rows: `n_batch` for buffers every group uses; `decide_rows` (kMaxSparseBatch, or n_batch when
// prompts are masked too) for what only a sparse decision needs; `list_rows` (at most
// kDownListBlock) for the neuron lists of the down projection.
#pragma once

#include <cstdint>
#include <vector>

#include "sparse/ffn_types.h"

namespace hearth::sparse {

struct FfnScratch {
  FfnScratch(const FfnShape& shape, const FfnMode& mode);

  // Bytes the constructor allocates for this shape and mode: a device that runs an executor
  // charges them to its memory before making it.
  static uint64_t bytes(const FfnShape& shape, const FfnMode& mode);

  std::vector<float> gate;        // [n_batch, n_ff] gate products, then act(gate); sparse: [n, k]
  std::vector<float> up;          // [n_batch, n_ff] up products, then the activations a; sparse:
                                  //                 [n, k] over the selected neurons
  std::vector<float> decided;     // [decide_rows, n_ff] Oracle, Threshold: act(gate) (or act(up)),
                                  //                 at or below the threshold zeroed
  std::vector<float> score;       // [decide_rows, n_ff] Predictor: scores
  std::vector<float> hidden;      // [decide_rows, max_hidden] Predictor: relu(fc1 · p)
  std::vector<float> file_order;  // [n_batch, n_ff] activations in the file's neuron order
  std::vector<float> observed;    // [n_batch, n_ff] observer: act(gate) in the file's order
  std::vector<float> input;       // [decide_rows, n_embd] Threshold: the input with its small
                                  //                 elements zeroed
  // Threshold, input-major copies: each row's inputs that are not zero, their values, how many,
  // and how many columns some row needs (-1: not compacted for this group).
  std::vector<int32_t> input_idx;     // [decide_rows, n_embd]
  std::vector<float> input_values;    // [decide_rows, n_embd]
  std::vector<int64_t> input_counts;  // [decide_rows]
  int64_t n_inputs = -1;
  // The down projection of the sparse modes, token by token (ffn_down.cc):
  std::vector<int32_t> down_tokens;  // [decide_rows] the tokens that take the dense product
  std::vector<int32_t> list_tokens;  // [list_rows] the tokens that take the axpy, a block at a time
  std::vector<int64_t> down_counts;  // [list_rows] their neurons with a non-zero activation,
  std::vector<int32_t> down_idx;     // [list_rows, n_ff]   ascending,
  std::vector<float> down_coef;      // [list_rows, n_ff]   and those activations
  std::vector<float> down_out;       // [decide_rows, n_embd] results of tokens not side by side
  std::vector<int32_t> idx;       // [n_ff] the selected neurons (union over tokens), ascending
  std::vector<int32_t> all;       // [n_ff] 0, 1, ..., n_ff - 1
};

}  // namespace hearth::sparse
