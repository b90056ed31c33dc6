// Puts part of a loaded model on a device (DeviceOptions): sizes the budget, asks the placement
// solver (src/sparse/placement.h) what goes there, caches its answer beside the model, and has the
// device copy those weights. The sessions then split each layer between the device and the host.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "device/device.h"
#include "core/error.h"
#include "ops/attention_block.h"
#include "model/model_impl.h"
#include "model/neuron_order.h"
#include "sparse/ffn.h"
#include "sparse/placement.h"
#include "sparse/placement_cache.h"

namespace hearth {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
// Left free when the budget is "all free memory" (PowerInfer leaves 256 MiB; the driver and other
// programs want some).
constexpr uint64_t kSafetyMargin = 512ull << 20;

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / kGiB);
  return buf;
}

int32_t placement_ctx(const DeviceOptions& o, const ModelConfig& c) {
  return o.n_ctx > 0 ? o.n_ctx : static_cast<int32_t>(default_context(c));
}

// The devices' attention takes the sequential RMSNorm block without biases, per-head q/k norms,
// post-norms, learned positions, a sliding window, another score scale or soft-capping (llama,
// bamboo); other blocks keep attention on the host.
bool device_takes_attention(const ModelConfig& c) {
  const BlockRecipe& b = c.block;
  return !b.parallel && c.norm == NormType::Rms && !b.qkv_bias && !b.qk_norm && !b.out_bias &&
         !b.post_norms && !b.learned_positions && c.n_swa == 0 && c.attn_scale == 0.0f &&
         c.attn_softcap == 0.0f;
}

SparseMode placement_mode(const DeviceOptions& o, const Model::Impl& m) {
  return o.sparse != SparseMode::Auto ? o.sparse : m.auto_sparse_mode();
}

// What each part of each layer costs on the device, in the types the device will hold.
sparse::PlacementRequest placement_request(const Model::Impl& m, const DeviceOptions& o,
                                           SparseMode mode, uint64_t budget) {
  const ModelConfig& c = m.config;
  const bool attention = device_takes_attention(c);
  const bool predictor = mode == SparseMode::Predictor;
  const uint64_t kv_elem = o.kv_type == KvType::F16 ? 2 : 4;
  sparse::PlacementRequest r;
  r.budget_bytes = budget;
  r.strategy = o.placement == "layers" ? sparse::PlacementStrategy::Layers
                                       : sparse::PlacementStrategy::Neurons;
  for (size_t il = 0; il < m.weights.layers.size(); ++il) {
    const LayerWeights& l = m.weights.layers[il];
    sparse::LayerCosts lc;
    lc.n_ff = c.n_ff;
    // Other blocks keep attention on the host: their device part is the FFN alone.
    if (attention) {
      lc.attention_bytes = static_cast<uint64_t>(c.n_embd) * sizeof(float) + l.wq.bytes() +
                           l.wk.bytes() + l.wv.bytes() + l.wo.bytes();
      lc.kv_bytes = 2 * static_cast<uint64_t>(placement_ctx(o, c)) * o.n_seq * c.n_embd_kv() *
                    kv_elem;
    }
    const DType down_t = l.ffn_down_t.present() ? l.ffn_down_t.type
                                                : sparse::neuron_major_type(l.ffn_down.type, c.n_embd);
    lc.neuron_bytes = row_bytes(l.ffn_up.type, c.n_embd) + row_bytes(down_t, c.n_embd);
    if (l.ffn_gate.present()) lc.neuron_bytes += row_bytes(l.ffn_gate.type, c.n_embd);
    if (l.ffn_up_b) lc.neuron_bytes += sizeof(float);
    if (predictor) {
      lc.predictor_bytes = l.fc1.bytes();
      lc.neuron_bytes += row_bytes(l.fc2.type, l.fc2.cols);
    }
    lc.frequency = layer_frequency(m, il);
    r.layers.push_back(std::move(lc));
  }
  return r;
}

// The model file's identity for the placement cache: its path, size and modification time.
std::string model_identity(const gguf::GgufFile& f) {
  struct stat st {};
  const long long mtime = ::stat(f.path().c_str(), &st) == 0 ? static_cast<long long>(st.st_mtime) : 0;
  return f.path() + "|" + std::to_string(f.file_size()) + "|" + std::to_string(mtime);
}

sparse::Placement solve_or_load(const Model::Impl& m, const DeviceOptions& o,
                                const sparse::PlacementRequest& request, std::string& cache_note) {
  if (o.disable_gpu_index) return sparse::solve_placement(request);
  const std::string path = sparse::placement_cache_path(m.file->path());
  const uint64_t key = sparse::placement_key(model_identity(*m.file), request);
  std::string why;
  if (!o.reset_gpu_index) {
    if (auto cached = sparse::load_placement_cache(path, key, &why)) {
      cache_note = " (cached in " + path + ")";
      return *cached;
    }
  }
  sparse::Placement p = sparse::solve_placement(request);
  if (sparse::save_placement_cache(path, key, p, &why)) {
    cache_note = " (saved to " + path + ")";
  } else {
    cache_note = " (not cached: " + why + ")";
  }
  return p;
}

// The device session's shapes: the context and batches the sessions will use, and the widest
// predictor.
backend::DeviceSessionOptions session_options(const Model::Impl& m, const DeviceOptions& o,
                                              SparseMode mode) {
  backend::DeviceSessionOptions so;
  so.n_ctx = placement_ctx(o, m.config);
  so.n_seq = o.n_seq;
  so.n_batch = std::min(o.n_batch, so.n_ctx);
  so.n_ffn_batch = static_cast<int32_t>(sparse::kMaxSparseBatch);
  so.kv_type = o.kv_type;
  so.mode = mode;
  for (const LayerWeights& l : m.weights.layers) {
    so.predictor_width = std::max(so.predictor_width, l.fc1.rows);
  }
  return so;
}

// The bytes the placement may use: --vram-budget, or the free memory less a safety margin.
uint64_t device_budget(const DeviceOptions& o, const backend::Device& device,
                       const backend::MemoryInfo& mem) {
  if (o.vram_budget_gib < 0) return mem.free > kSafetyMargin ? mem.free - kSafetyMargin : 0;
  if (!std::isfinite(o.vram_budget_gib)) fail("--vram-budget must be a number of GiB");
  const auto budget = static_cast<uint64_t>(o.vram_budget_gib * kGiB);
  if (budget > mem.free) {
    fail("--vram-budget ", o.vram_budget_gib, " GiB is more than the ", device.name(),
         "'s free memory (", gib(mem.free), " of ", gib(mem.total), ")");
  }
  return budget;
}

// The neurons of [0, n_ff) not in `hot` (ascending): what the host computes.
std::vector<int32_t> complement(const std::vector<int32_t>& hot, int64_t n_ff) {
  std::vector<int32_t> cold;
  size_t h = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(n_ff); ++i) {
    if (h < hot.size() && hot[h] == i) {
      ++h;
    } else {
      cold.push_back(i);
    }
  }
  return cold;
}

// What the device holds per layer under placement p; fills m.cold with the host's neurons.
// Returns whether the device holds anything.
bool device_model(Model::Impl& m, const sparse::Placement& p, backend::DeviceModel& dm) {
  dm.config = m.config;
  const sparse::NeuronMajorDown* made = nullptr;
  bool any = false;
  m.cold.assign(m.weights.layers.size(), {});
  for (size_t il = 0; il < m.weights.layers.size(); ++il) {
    const LayerWeights& l = m.weights.layers[il];
    const sparse::LayerPlacement& lp = p.layers[il];
    backend::DeviceLayer d;
    d.attention = lp.attention && device_takes_attention(m.config);
    d.hot = lp.hot;
    d.weights = &l;
    d.predictor = lp.predictor;
    d.down_t = &l.ffn_down_t;
    if (!d.hot.empty()) {
      if (!l.ffn_down_t.present()) {
        if (!made) made = &m.neuron_major_down(/*every_layer=*/true);
        d.down_t = &made->layers[il];
      }
      m.cold[il] = complement(d.hot, m.config.n_ff);
    }
    any = any || d.attention || !d.hot.empty();
    dm.layers.push_back(std::move(d));
  }
  return any;
}

}  // namespace

void place_on_device(Model::Impl& m, const DeviceOptions& o) {
  std::string kind = o.device;
  if (kind == "none") return;
  if (kind == "auto") {
    if (!backend::cuda_available()) return;
    kind = "cuda";
  }
  if (o.n_seq < 1 || o.n_batch < 1) fail("the device options need n_seq and n_batch >= 1");
  if (kind == "standin" && !(o.standin_gib > 0.0)) fail("--standin-vram must be positive");
  auto device = backend::make_device(
      kind, static_cast<uint64_t>(std::max(0.0, o.standin_gib) * kGiB), o.standin_threads);
  const SparseMode mode = placement_mode(o, m);
  // Sessions of another mode may open on the model (bench alternates modes, the server's
  // requests pick theirs): the larger of this mode's buffers and a dense session's, whose prompts
  // may take a device's matrix-product scratch (CUDA's cuBLAS), is set aside.
  const backend::DeviceSessionOptions so = session_options(m, o, mode);
  const uint64_t scratch =
      std::max(device->session_scratch_bytes(m.config, so),
               device->session_scratch_bytes(m.config, session_options(m, o, SparseMode::Dense))) *
      static_cast<uint64_t>(o.n_seq);
  const uint64_t budget = device_budget(o, *device, device->memory());
  if (budget <= scratch) {
    m.placement_note = "device budget " + gib(budget) + " does not even cover the " +
                       gib(scratch) + " of activation buffers: everything runs on the CPU";
    return;
  }
  const sparse::PlacementRequest request = placement_request(m, o, mode, budget - scratch);
  std::string cache_note;
  sparse::Placement p = solve_or_load(m, o, request, cache_note);
  if (o.disable_gpu_index) {
    for (sparse::LayerPlacement& l : p.layers) l.hot.clear(), l.predictor = false;
  }
  backend::DeviceModel dm;
  const bool any = device_model(m, p, dm);
  m.placement_note = device->name() + ": " + p.note + cache_note;
  if (!any) return;
  device->load(dm);
  m.device_attention.clear();
  m.device_hot.clear();
  for (const backend::DeviceLayer& d : dm.layers) {
    m.device_attention.push_back(d.attention);
    m.device_hot.push_back(static_cast<int64_t>(d.hot.size()));
  }
  m.device_session = so;
  m.device = std::move(device);
}

}  // namespace hearth
