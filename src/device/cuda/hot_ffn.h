// The hot part of a layer's FFN on the device, deciding by the host's sparse::LayerRule of the
// layer (the values its NeuronRules decide by) over the hot neurons only:
//   Dense      every hot neuron;
//   Oracle     act(gate) != 0 (act(up) without a gate), from the full hot gate;
//   Threshold  |act(gate)| > threshold, then of those |act(gate) · up| > down_threshold when
//              down_threshold > 0 (their down row is skipped otherwise);
//   Predictor  fc2_hot · relu(fc1 · p) >= threshold.
// Each token keeps only its own active neurons; the up/gate rows read are the union over the
// batch, compacted on the device into an ascending list (sparse.cuh), so results do not depend on
// the launch order. Internal to device/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device/cuda/device_weights.h"
#include "device/cuda/kernel_types.h"
#include "hearth/session.h"
#include "sparse/ffn_types.h"

namespace hearth::gpu {

// The layer's rule, and the activation the rule applies it to.
struct HotFfnRule {
  sparse::LayerRule layer;
  FfnActivation act = FfnActivation::Silu;
  bool up_relu = false;  // dReLU
};

// Device buffers of one session. Arrays [n, ld] hold token t's row at t · ld, ld = k_max: by hot
// neuron (f), or by position in the active list (u, g).
struct HotFfnBuffers {
  const float* xn = nullptr;      // [n, n_embd]
  const float* p = nullptr;       // [n, n_embd] (Predictor)
  float* out = nullptr;           // [n, n_embd]
  float* f = nullptr;             // full hot activations (Oracle, Threshold) or predictor mask
  float* u = nullptr;             // compact up, then the activations fed to down
  float* g = nullptr;             // compact gate
  float* hidden = nullptr;        // [n, h_max] predictor hidden layer
  int32_t* idx = nullptr;         // [k_max] active list
  const int32_t* iota = nullptr;  // [k_max] 0, 1, 2, ... (Dense)
  float* partial = nullptr;       // axpy scratch (sparse.cuh)
  FfnCounters* counters = nullptr;
  int64_t ld = 0;
};

// Enqueues out[n, n_embd] = Σ over each token's active hot neurons of a · down_t_hot (+ the
// layer's down bias), and the counters count_hot_ffn reads. Requires l.n_hot > 0.
void enqueue_hot_ffn(const DeviceLayerWeights& l, const HotFfnRule& rule, const HotFfnBuffers& b,
                     int64_t n, cudaStream_t stream);

// mask[t, j] = 1 if (fc2 · relu(fc1 · p[t]))_j >= threshold else 0, for t < n, j < fc2.rows;
// hidden[n, fc1.rows] is scratch.
void enqueue_predictor(const MatrixView& fc1, const MatrixView& fc2, const float* p, int64_t n,
                       float* hidden, float threshold, float* mask, int64_t ld,
                       cudaStream_t stream);

// Adds to stats what the host's FfnExecutor counts for the same work: the active (token, neuron)
// pairs and the weight bytes read (neurons_total is the session's to count).
void count_hot_ffn(const DeviceLayerWeights& l, const HotFfnRule& rule, const FfnCounters& c,
                   int64_t n, SparseStats& stats);

}  // namespace hearth::gpu
