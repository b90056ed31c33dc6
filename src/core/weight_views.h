// Views of a model's weights: matrices in ggml's layout inside the mapped file (or a copy the
// model made), and the norm and bias vectors, per layer. The plain data every layer from ops/
// upward computes with; nothing here owns tensor data except `owned`, which holds vectors that
// had to be converted to f32 at load (e.g. f16 norm weights).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace hearth {

// A weight matrix in ggml layout: `rows` rows of `cols` contiguous elements (GGUF ne = {cols,
// rows}). Or, with input_major, a float matrix held only as its input-major copy (a model-wide
// float model's projections: model_impl.h, hold_input_major_only): data is [cols, rows], row i
// input i's weight in every output, the rows lane-grouped (lane_grouped_row, ops/sparse_matmul.h)
// and `stride` bytes apart (0: rows elements; more where other matrices' outputs share the rows,
// as q, k and v share one copy). linear() reads either layout to the same bits; the kernels that
// take rows of W (gather_matmul, the device's uploads) take only the ggml layout.
// Or, with row_groups, a quantized matrix whose every 16 rows are rewritten as one row group
// (backend/cpu/kernels/row_groups.h; a dense model's K-quant matrices: model_impl.h,
// hold_row_groups): the same bytes per 16 rows, so views of whole groups keep their offsets,
// but no single row can be read. linear() takes it through matmul_row_groups.
struct Matrix {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  bool input_major = false;
  int64_t stride = 0;
  bool row_groups = false;

  bool present() const { return data != nullptr; }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(type, cols); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes(type, cols);
  }
  // Rows [first, first + n) as a matrix of their own (a view into the same data); ggml layout,
  // or row groups where first and n are whole groups (the caller's to check).
  Matrix rows_range(int64_t first, int64_t n) const {
    Matrix m{type, row(first), n, cols};
    m.row_groups = row_groups;
    return m;
  }
};

// Which fields a model fills follows from its block recipe (model/weights.h); absent ones stay
// null / not present. Bias and norm vectors are f32.
struct LayerWeights {
  const float* attn_norm = nullptr;      // [n_embd]
  const float* attn_norm_b = nullptr;    // [n_embd]  LayerNorm bias
  const float* attn_norm_2 = nullptr;    // [n_embd]  parallel blocks: the attention's own norm
  const float* attn_norm_2_b = nullptr;  // [n_embd]
  // A fused projection (BlockRecipe::fused_qkv): all Q rows, then K, then V. wq/wk/wv (and
  // bq/bk/bv) are views of its rows, so code reads them alike for every architecture.
  Matrix wqkv;                       // [n_head * head_dim + 2 * n_embd_kv, n_embd]
  Matrix wq;                         // [n_head * head_dim, n_embd]
  Matrix wk;                         // [n_head_kv * head_dim, n_embd]
  Matrix wv;                         // [n_head_kv * head_dim, n_embd]
  Matrix wo;                         // [n_embd, n_head * head_dim]
  const float* bqkv = nullptr;       // [q_dim + 2 * n_embd_kv] with wqkv, where it has a bias
  const float* bq = nullptr;         // [n_head * head_dim]
  const float* bk = nullptr;         // [n_head_kv * head_dim]
  const float* bv = nullptr;         // [n_head_kv * head_dim]
  const float* bo = nullptr;         // [n_embd]
  const float* attn_post_norm = nullptr;  // [n_embd] BlockRecipe::post_norms: of wo's output
  const float* ffn_post_norm = nullptr;   // [n_embd] and of the FFN's
  const float* attn_q_norm = nullptr;  // [head_dim] BlockRecipe::qk_norm: shared by every q head
  const float* attn_k_norm = nullptr;  // [head_dim] and every k head
  const float* ffn_norm = nullptr;   // [n_embd]
  const float* ffn_norm_b = nullptr; // [n_embd]
  // A fused projection (BlockRecipe::fused_gate_up): the gate's rows, then up's. ffn_gate and
  // ffn_up are views of its rows.
  Matrix ffn_gate_up;                // [2 * n_ff, n_embd]
  Matrix ffn_gate;                   // [n_ff, n_embd]   (absent for plain-ReLU FFNs)
  Matrix ffn_up;                     // [n_ff, n_embd]
  Matrix ffn_down;                   // [n_embd, n_ff]   (or, neuron-major, ffn_down_t)
  Matrix ffn_down_t;                 // [n_ff, n_embd]   row i = the output column of neuron i
  const float* ffn_up_b = nullptr;   // [n_ff]
  const float* ffn_down_b = nullptr; // [n_embd]  (of whichever of ffn_down / ffn_down_t is there)
  // Activation predictor (PowerInfer's): score = fc2 · relu(fc1 · p). Its width H varies per layer.
  Matrix fc1;                        // [H, n_embd]
  Matrix fc2;                        // [n_ff, H]

  bool has_predictor() const { return fc1.present() && fc2.present(); }
};

// Input-major copies of one layer's projections (row j = input j's weights in every output, as
// ffn_down_t is for down), which model-wide input thresholds read only for the inputs that pass:
// [n_embd, q_dim] wq_t, [n_embd, kv_dim] wk_t and wv_t, [q_dim, n_embd] wo_t, [n_embd, n_ff]
// gate_t and up_t. A matrix without a copy stays not present (its products stay dense).
// Where the three copies would share a type whose blocks tile each of them, q, k and v get one
// copy instead, [n_embd, q_dim + 2 kv_dim] wqkv_t, row j holding input j's rows of wq_t, wk_t
// and wv_t side by side.
struct InputMajorLayer {
  Matrix wq_t, wk_t, wv_t, wo_t, gate_t, up_t;
  Matrix wqkv_t;
};

struct Weights {
  Matrix token_embd;                  // [n_vocab, n_embd]
  Matrix pos_embd;                    // [n_pos, n_embd]  learned positions, else absent
  const float* output_norm = nullptr; // [n_embd]
  const float* output_norm_b = nullptr; // [n_embd]
  Matrix output;                      // [n_vocab, n_embd] (token_embd when tied)
  const float* rope_freqs = nullptr;  // [n_rot/2] RoPE frequency divisors, where the file has them
  // [n_rot/2] Phi-3 LongRoPE divisors for long and short contexts, where the file has them.
  const float* rope_factors_long = nullptr;
  const float* rope_factors_short = nullptr;
  std::vector<LayerWeights> layers;
  std::vector<std::vector<float>> owned;
};

}  // namespace hearth
