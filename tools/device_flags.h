// Flags that put part of the model on a device (hybrid CPU/GPU execution), named as PowerInfer's
// users know them: --vram-budget, --reset-gpu-index, --disable-gpu-index.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "cli_common.h"
#include "hearth/model.h"

namespace hearth::cli {

struct DeviceFlags {
  // Not "auto" yet: the CUDA path has not run on a GPU (README), so using a GPU is asked for.
  std::string device = "none";
  double vram_budget = -1.0;
  double standin_vram = 4.0;
  int32_t standin_threads = 1;
  std::string placement = "neurons";
  bool reset_gpu_index = false;
  bool disable_gpu_index = false;

  void add_to(CLI::App& app);
  // The load options for sessions made with sf (context, batch, cache type, sparse mode), n_seq
  // of them side by side.
  LoadOptions load_options(const SessionFlags& sf, int32_t n_seq = 1) const;
};

// Loads the model with both flag sets and prints what was placed on the device (if anything) to
// stderr.
std::shared_ptr<const Model> load_model(const std::string& path, const SessionFlags& sf,
                                        const DeviceFlags& df, int32_t n_seq = 1);

}  // namespace hearth::cli
