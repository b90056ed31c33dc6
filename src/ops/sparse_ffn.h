// One decode token's activation-sparse FFN in a single pass of the thread pool (DESIGN.md 2, 5).
//
// The unfused path (sparse/ffn.cc) runs the predictor's fc2, the gather of up/gate, and the
// axpy over down_t as separate pool runs with serial steps between them; at one token each run is
// short, so the barriers and the serial steps cost a measurable share of a sparse layer
// (docs/benchmarks.md, issue 3). But a neuron's down row needs only that neuron's own
// activation, so nothing forces a barrier between scoring a neuron and adding its down row:
// here the candidates are cut into fixed blocks, and whichever thread takes a block scores it,
// keeps the neurons that fire, gathers their up/gate rows, applies the activation and adds their
// down rows into the block's own partial sum. The partials are then added in block order.
// Blocks are taken dynamically (balanced by the work actually found, whatever the density) and
// their bounds depend only on the shapes, so the result is the same bits for any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/context.h"
#include "core/matrix.h"
#include "ops/activation.h"

namespace hearth {

// One layer's FFN as the fused decode step reads it.
struct SparseFfnLayer {
  Matrix fc2;     // [n_ff, H]       predictor output layer; absent: every candidate fires
  Matrix up;      // [n_ff, n_embd]
  Matrix gate;    // [n_ff, n_embd]  absent: a = act(up · x)
  Matrix down_t;  // [n_ff, n_embd]  neuron-major down projection
  const float* up_bias = nullptr;  // [n_ff] or null
  const int32_t* cand = nullptr;   // [n_cand] the neurons this call may compute, ascending
  int64_t n_cand = 0;
  float threshold = 0.0f;  // neuron i fires iff its score >= threshold
  Activation act = Activation::Relu;
  bool up_relu = false;  // dReLU: relu(up) before the product
};

// Buffers of the fused step, sized for the largest layer once, so decoding never allocates.
class SparseFfnWorkspace {
 public:
  // n_embd: output width; max_cand: most candidates per call; max_hidden: widest predictor.
  void reserve(int64_t n_embd, int64_t max_cand, int64_t max_hidden);
  uint64_t bytes() const;

 private:
  friend int64_t sparse_ffn_decode(cpu::CpuContext&, const SparseFfnLayer&, const float*,
                                   const float*, SparseFfnWorkspace&, float*, uint64_t*);
  std::vector<float> partial_;              // [blocks, n_embd]
  std::vector<int64_t> active_;             // [blocks] neurons fired per block
  std::vector<uint8_t> x_up_, x_gate_, h_;  // x and the hidden layer in each kernel's format
};

// Neurons per block: a multiple of the Q4_0 axpy's coefficient group.
inline constexpr int64_t kFusedBlock = 256;

// out[n_embd] = Σ_{i in cand, fires(i)} a_i · down_t[i], a_i = act(gate_i · x) · up_i · x
// (or act(up_i · x) without a gate), with fires(i) = fc2_i · h >= threshold.
// h[H] is the predictor's hidden layer after its ReLU (ignored without fc2), x[n_embd] the
// normalised input. Returns the number of neurons that fired; adds the weight bytes read to
// *bytes when given.
int64_t sparse_ffn_decode(cpu::CpuContext& ctx, const SparseFfnLayer& f, const float* h,
                          const float* x, SparseFfnWorkspace& ws, float* out,
                          uint64_t* bytes = nullptr);

}  // namespace hearth
