// The device buffers of one CudaDeviceSession, sized in one place: session_sizes() is both what
// open_session allocates and what Device::session_scratch_bytes reports. Internal to
// device/cuda/.
#pragma once

#include <cstdint>

#include "device/cuda/device_memory.h"
#include "device/cuda/device_weights.h"
#include "device/device.h"

namespace hearth::gpu {

// Bytes of each buffer (0: not needed by this model).
struct SessionSizes {
  // Attention block, n_batch tokens.
  uint64_t x = 0, xn = 0;     // [n_batch, n_embd] floats
  uint64_t q = 0, att = 0;    // [n_batch, n_head · head_dim] floats
  uint64_t k = 0, v = 0;      // [n_batch, n_head_kv · head_dim] floats
  uint64_t rope = 0;          // [n_ctx, n_rot] floats: the host's RopeTable
  uint64_t gemm_act = 0;      // cuBLAS path (linear.h): activations as F16/BF16
  uint64_t gemm_weights = 0;  // and a quantized matrix as F16
  uint64_t cublas_workspace = 0;
  // Hot FFN, n_ffn_batch tokens (B).
  uint64_t ffn_io = 0;       // each of xn, out: [B, n_embd] floats
  uint64_t ffn_p = 0;        // [B, n_embd] floats: the predictor's input (Predictor mode)
  uint64_t ffn_cols = 0;     // each of f, u, g: [B, k_max] floats
  uint64_t ffn_hidden = 0;   // [B, h_max] floats: the predictor's hidden layer
  uint64_t ffn_idx = 0;      // each of idx, iota: [k_max] int32
  uint64_t ffn_partial = 0;  // the axpy's partial sums
  uint64_t counters = 0;     // FfnCounters
  // Not scratch: one attention layer's K (or V) cache, [n_seq][n_ctx, n_head_kv, head_dim].
  uint64_t kv_layer = 0;

  uint64_t scratch_bytes() const;
};

// Validates the options against the config (throws hearth::Error) and sizes the buffers.
SessionSizes session_sizes(const ModelConfig& config, const backend::DeviceSessionOptions& options,
                           const ModelExtents& extents);

struct SessionBuffers {
  SessionBuffers(DeviceAllocator& alloc, const SessionSizes& sizes);

  DeviceBuffer x, xn, q, k, v, att, rope, gemm_act, gemm_weights, cublas_workspace;
  DeviceBuffer ffn_xn, ffn_p, ffn_out, ffn_f, ffn_u, ffn_g, ffn_h, ffn_idx, ffn_iota, ffn_partial;
  DeviceBuffer counters;
};

}  // namespace hearth::gpu
