#include "ops/sparse_ffn.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"

namespace hearth {
namespace {

// x in the activation format of k's weights: x itself for float weights, else quantized into buf.
const uint8_t* as_act(const cpu::WeightKernels& k, const float* x, int64_t n,
                      std::vector<uint8_t>& buf) {
  if (k.act == cpu::ActFormat::F32) return reinterpret_cast<const uint8_t*>(x);
  k.to_act(x, buf.data(), n);
  return buf.data();
}

void check_layer(const SparseFfnLayer& f, int64_t n_embd) {
  const char* op = "sparse_ffn_decode";
  const int64_t n_ff = f.up.rows;
  const auto same = [&](const Matrix& m, const char* name) {
    if (m.data && (m.rows != n_ff || m.cols != n_embd)) {
      fail(op, ": ", name, " is [", m.rows, ", ", m.cols, "], expected [", n_ff, ", ", n_embd, "]");
    }
  };
  if (!f.up.data || !f.down_t.data) fail(op, ": up and down_t are required");
  same(f.gate, "gate");
  same(f.down_t, "down_t");
  if (f.fc2.data && f.fc2.rows != n_ff)
    fail(op, ": fc2 has ", f.fc2.rows, " rows, expected ", n_ff);
  for (const Matrix* m : {&f.up, &f.gate, &f.down_t, &f.fc2}) {
    if (m->data && m->cols % dtype_block_size(m->type) != 0) {
      fail(op, ": ", m->cols, " columns is not a multiple of the ", dtype_name(m->type),
           " block size");
    }
  }
  for (int64_t c = 0; c < f.n_cand; ++c) {
    if (f.cand[c] < 0 || f.cand[c] >= n_ff)
      fail(op, ": neuron ", f.cand[c], " outside [0, ", n_ff, ")");
  }
}

}  // namespace

void SparseFfnWorkspace::reserve(int64_t n_embd, int64_t max_cand, int64_t max_hidden) {
  const int64_t blocks = (max_cand + kFusedBlock - 1) / kFusedBlock;
  partial_.resize(static_cast<size_t>(blocks * n_embd));
  active_.resize(static_cast<size_t>(blocks));
  // Q8 activation rows are never larger than their F32 source.
  x_up_.resize(cpu::act_row_bytes(cpu::ActFormat::Q8, n_embd));
  x_gate_.resize(x_up_.size());
  h_.resize(cpu::act_row_bytes(cpu::ActFormat::Q8, std::max<int64_t>(max_hidden, 1)));
}

uint64_t SparseFfnWorkspace::bytes() const {
  return partial_.size() * sizeof(float) + active_.size() * sizeof(int64_t) + x_up_.size() +
         x_gate_.size() + h_.size();
}

int64_t sparse_ffn_decode(cpu::CpuContext& ctx, const SparseFfnLayer& f, const float* h,
                          const float* x, SparseFfnWorkspace& ws, float* out, uint64_t* bytes) {
  const int64_t n_embd = f.down_t.cols;
  check_layer(f, n_embd);
  const int64_t blocks = (f.n_cand + kFusedBlock - 1) / kFusedBlock;
  if (blocks * n_embd > static_cast<int64_t>(ws.partial_.size()) ||
      (f.fc2.data && cpu::act_row_bytes(cpu::ActFormat::Q8, f.fc2.cols) > ws.h_.size())) {
    fail("sparse_ffn_decode: the workspace is smaller than this layer");
  }
  const cpu::Kernels& kt = ctx.kernels();
  const cpu::WeightKernels& k_up = kt.weights(f.up.type);
  const cpu::WeightKernels& k_down = kt.weights(f.down_t.type);
  const cpu::WeightKernels* k_gate = f.gate.data ? &kt.weights(f.gate.type) : nullptr;
  const cpu::WeightKernels* k_fc2 = f.fc2.data ? &kt.weights(f.fc2.type) : nullptr;
  const uint8_t* xu = as_act(k_up, x, n_embd, ws.x_up_);
  const uint8_t* xg = k_gate ? as_act(*k_gate, x, n_embd, ws.x_gate_) : nullptr;
  const uint8_t* hq = k_fc2 ? as_act(*k_fc2, h, f.fc2.cols, ws.h_) : nullptr;
  const cpu::Isa isa = ctx.isa();
  float* const partial = ws.partial_.data();
  int64_t* const active = ws.active_.data();

  std::atomic<int64_t> next{0};
  auto blocks_task = [&](int, int) {
    float score[kFusedBlock], u[kFusedBlock], g[kFusedBlock];
    int32_t fired[kFusedBlock];
    for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      const int64_t c0 = b * kFusedBlock, nc = std::min(kFusedBlock, f.n_cand - c0);
      const int32_t* cand = f.cand + c0;
      int64_t m = 0;
      if (k_fc2) {
        k_fc2->gemm_gather(f.fc2.cols, f.fc2.data, f.fc2.stride(), cand, nc, hq, 0, 1, score, 0);
        for (int64_t j = 0; j < nc; ++j) {
          if (score[j] >= f.threshold) fired[m++] = cand[j];
        }
      } else {
        std::copy(cand, cand + nc, fired);
        m = nc;
      }
      active[b] = m;
      if (m == 0) continue;
      // a[m] in u: the activations of the neurons that fired.
      k_up.gemm_gather(n_embd, f.up.data, f.up.stride(), fired, m, xu, 0, 1, u, 0);
      if (f.up_bias) {
        for (int64_t j = 0; j < m; ++j) u[j] += f.up_bias[fired[j]];
      }
      if (k_gate) {
        k_gate->gemm_gather(n_embd, f.gate.data, f.gate.stride(), fired, m, xg, 0, 1, g, 0);
        if (f.up_relu) activate(isa, Activation::Relu, u, m, u);
        glu(isa, f.act, g, u, m, u);
      } else {
        activate(isa, f.act, u, m, u);
      }
      float* pb = partial + b * n_embd;
      std::memset(pb, 0, static_cast<size_t>(n_embd) * sizeof(float));
      k_down.axpy(n_embd, f.down_t.data, f.down_t.stride(), fired, m, u, static_cast<size_t>(m), 1,
                  pb, static_cast<size_t>(n_embd));
    }
  };
  // Column ranges of the output, each summed over the blocks in block order.
  auto sum_task = [&](int ith, int nth) {
    const auto [c0, c1] = cpu::split_range(n_embd, ith, nth);
    if (c1 <= c0) return;
    float* o = out + c0;
    std::fill(o, out + c1, 0.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      if (active[b] == 0) continue;
      const float* pb = partial + b * n_embd + c0;
      for (int64_t c = 0; c < c1 - c0; ++c) o[c] += pb[c];
    }
  };
  ctx.pool().run(blocks_task);
  ctx.pool().run(sum_task);

  int64_t total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += active[b];
  if (bytes) {
    const uint64_t per_neuron =
        f.up.stride() + (f.gate.data ? f.gate.stride() : 0) + f.down_t.stride();
    *bytes += static_cast<uint64_t>(total) * per_neuron +
              (f.fc2.data ? static_cast<uint64_t>(f.n_cand) * f.fc2.stride() : 0);
  }
  return total;
}

}  // namespace hearth
