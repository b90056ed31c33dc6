#include "device_flags.h"

#include <algorithm>
#include <cstdio>

namespace hearth::cli {

void DeviceFlags::add_to(CLI::App& app) {
  app.add_option("--device", device,
                 "where part of the model runs: none (CPU only), cuda, auto (a CUDA GPU if any), "
                 "or standin (a CPU stand-in for a GPU, for tests)")
      ->check(CLI::IsMember({"auto", "none", "cuda", "standin"}))
      ->capture_default_str();
  app.add_option("--vram-budget", vram_budget,
                 "GiB of device memory to use (default: the free memory less a margin)")
      ->type_name("GiB");
  app.add_option("--standin-vram", standin_vram, "memory of the stand-in device")
      ->type_name("GiB")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--standin-threads", standin_threads, "threads of the stand-in device")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--placement", placement,
                 "what goes on the device first: neurons (the most active FFN neurons of every "
                 "layer, hybrid sparse) or layers (whole layers in order, like -ngl)")
      ->check(CLI::IsMember({"neurons", "layers"}))->capture_default_str();
  app.add_flag("--reset-gpu-index", reset_gpu_index,
               "solve the placement again even when a cached one matches");
  app.add_flag("--disable-gpu-index", disable_gpu_index,
               "keep every FFN neuron on the CPU (the device runs attention only)");
}

LoadOptions DeviceFlags::load_options(const SessionFlags& sf, int32_t n_seq) const {
  LoadOptions o;
  o.weights = sf.weights.load();
  o.reorder_neurons = !sf.no_reorder;
  o.q8_predictors = !sf.float_predictors;
  // Only where every session is to decide by thresholds: a dense or oracle session would read the
  // copies too, at dense decode's cost.
  const std::vector<SparseMode> modes = sf.sparse_modes();
  o.input_major_only =
      !sf.keep_matrices && std::all_of(modes.begin(), modes.end(), [](SparseMode m) {
        return m == SparseMode::Auto || m == SparseMode::Threshold;
      });
  const bool all_dense = std::all_of(modes.begin(), modes.end(), [](SparseMode m) {
    return m == SparseMode::Auto || m == SparseMode::Dense;
  });
  o.row_groups = sf.no_repack ? RowGroups::None
                 : all_dense  ? RowGroups::All
                              : RowGroups::WholeReads;
  DeviceOptions& d = o.device;
  d.device = device;
  d.vram_budget_gib = vram_budget;
  d.standin_gib = standin_vram;
  d.standin_threads = standin_threads;
  d.placement = placement;
  d.reset_gpu_index = reset_gpu_index;
  d.disable_gpu_index = disable_gpu_index;
  const SessionOptions so = sf.options();
  d.n_ctx = so.n_ctx;
  d.n_seq = n_seq;
  d.n_batch = so.n_batch;
  d.kv_type = so.kv_type;
  d.sparse = so.sparse;
  return o;
}

std::shared_ptr<const Model> load_model(const std::string& path, const SessionFlags& sf,
                                        const DeviceFlags& df, int32_t n_seq) {
  auto model = Model::load(path, df.load_options(sf, n_seq));
  if (!model->placement_note().empty()) {
    std::fprintf(stderr, "hearth: %s\n", model->placement_note().c_str());
  }
  const std::vector<SparseMode> modes = sf.sparse_modes();
  if (!model->sparse_note().empty() &&
      std::find(modes.begin(), modes.end(), SparseMode::Auto) != modes.end()) {
    std::fprintf(stderr, "hearth: %s\n", model->sparse_note().c_str());
  }
  return model;
}

}  // namespace hearth::cli
