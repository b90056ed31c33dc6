#include "device/cuda/session_buffers.h"

#include <algorithm>

#include "device/cuda/linear.h"
#include "device/cuda/sparse.cuh"
#include "core/error.h"

namespace hearth::gpu {
namespace {

// cuBLAS's own workspace, handed to it (cublasSetWorkspace) so that it allocates nothing we do not
// count. 4 MiB is what NVIDIA recommends short of Hopper, where a smaller one only limits the
// choice of kernels for prompt-sized products.
constexpr uint64_t kCublasWorkspace = 4ull << 20;

constexpr uint64_t kFloat = sizeof(float);

void check_options(const ModelConfig& c, const backend::DeviceSessionOptions& o,
                   const ModelExtents& e) {
  if (e.attention && (o.n_ctx < 1 || o.n_seq < 1 || o.n_batch < 1)) {
    fail("a device session with attention needs n_ctx, n_seq and n_batch of at least 1 (got ",
         o.n_ctx, ", ", o.n_seq, ", ", o.n_batch, ")");
  }
  if (e.k_max > 0 && o.n_ffn_batch < 1) {
    fail("a device session with FFN neurons needs n_ffn_batch >= 1, not ", o.n_ffn_batch);
  }
  if (o.mode == SparseMode::Auto) fail("internal: a device session needs a resolved sparse mode");
  const auto n_layer = static_cast<size_t>(c.n_layer);
  if (!o.rules.empty() && o.rules.size() != n_layer) {
    fail("the device session got ", o.rules.size(), " layer rules for ", n_layer, " layers");
  }
}

}  // namespace

uint64_t SessionSizes::scratch_bytes() const {
  return x + xn + q + att + k + v + rope + gemm_act + gemm_weights + cublas_workspace + 2 * ffn_io +
         ffn_p + 3 * ffn_cols + ffn_hidden + 2 * ffn_idx + ffn_partial + counters;
}

SessionSizes session_sizes(const ModelConfig& c, const backend::DeviceSessionOptions& o,
                           const ModelExtents& e) {
  check_options(c, o, e);
  SessionSizes s;
  if (e.attention) {
    const uint64_t nb = static_cast<uint64_t>(o.n_batch);
    const int64_t q_dim = c.n_head * c.head_dim;
    s.x = s.xn = nb * c.n_embd * kFloat;
    s.q = s.att = nb * q_dim * kFloat;
    s.k = s.v = nb * c.n_embd_kv() * kFloat;
    if (c.rope_type != RopeType::None) s.rope = static_cast<uint64_t>(o.n_ctx) * c.n_rot * kFloat;
    // cuBLAS only for dense sessions: its products round activations to 16 bits and sum in an
    // order of its own choosing, so a token's results would depend on the batch it came in,
    // which the sparse modes promise not to (batch invariance); their prompts take the matvec
    // kernel at every size.
    if (o.n_batch >= kGemmMinTokens && o.mode == SparseMode::Dense) {
      s.gemm_act = gemm_act_bytes(o.n_batch, std::max(c.n_embd, q_dim));
      s.gemm_weights = e.gemm_weights;
      s.cublas_workspace = kCublasWorkspace;
    }
    const uint64_t elem = o.kv_type == KvType::F16 ? 2 : 4;
    s.kv_layer = static_cast<uint64_t>(o.n_seq) * o.n_ctx * c.n_embd_kv() * elem;
  }
  if (e.k_max > 0) {
    const uint64_t b = static_cast<uint64_t>(o.n_ffn_batch);
    s.ffn_io = b * c.n_embd * kFloat;
    s.ffn_cols = b * e.k_max * kFloat;
    if (o.mode == SparseMode::Predictor) {
      s.ffn_p = s.ffn_io;
      s.ffn_hidden = b * e.h_max * kFloat;
    }
    s.ffn_idx = static_cast<uint64_t>(e.k_max) * sizeof(int32_t);
    s.ffn_partial = axpy_partial_floats(e.k_max, o.n_ffn_batch, c.n_embd) * kFloat;
    s.counters = sizeof(FfnCounters);
  }
  return s;
}

SessionBuffers::SessionBuffers(DeviceAllocator& a, const SessionSizes& s)
    : x(a, s.x, "the session's hidden states"),
      xn(a, s.xn, "the session's normed hidden states"),
      q(a, s.q, "the session's queries"),
      k(a, s.k, "the session's keys"),
      v(a, s.v, "the session's values"),
      att(a, s.att, "the session's attention output"),
      rope(a, s.rope, "the session's RoPE table"),
      gemm_act(a, s.gemm_act, "the session's cuBLAS activation scratch"),
      gemm_weights(a, s.gemm_weights, "the session's cuBLAS dequantization scratch"),
      cublas_workspace(a, s.cublas_workspace, "the session's cuBLAS workspace"),
      ffn_xn(a, s.ffn_io, "the session's FFN input"),
      ffn_p(a, s.ffn_p, "the session's predictor input"),
      ffn_out(a, s.ffn_io, "the session's FFN output"),
      ffn_f(a, s.ffn_cols, "the session's FFN gate activations"),
      ffn_u(a, s.ffn_cols, "the session's FFN up activations"),
      ffn_g(a, s.ffn_cols, "the session's FFN gate rows"),
      ffn_h(a, s.ffn_hidden, "the session's predictor hidden layer"),
      ffn_idx(a, s.ffn_idx, "the session's active neuron list"),
      ffn_iota(a, s.ffn_idx, "the session's hot neuron list"),
      ffn_partial(a, s.ffn_partial, "the session's FFN partial sums"),
      counters(a, s.counters, "the session's FFN counters") {}

}  // namespace hearth::gpu
