// `hearth imatrix`: an importance matrix (model/imatrix_file.h) from a model run over text. Each
// weight matrix's input rows are squared and summed per column by a MatmulObserver attached to
// a dense session, so the statistics are those of the forward pass itself (llama.cpp's
// llama-imatrix does the same in its graph callback).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hearth/model.h"
#include "model/imatrix_file.h"

namespace hearth::calib {

struct ImatrixOptions {
  std::string text;          // calibration text (not the evaluation text)
  std::string dataset_name;  // recorded in imatrix.datasets (the text's file name)
  int64_t window = 512;      // tokens per window (the context restarts per window)
  int64_t max_tokens = 0;    // tokens evaluated at most (0: all)
  int n_threads = 1;
  // Also sum x x^T per matrix (for GPTQ) while the Gram matrices, in double while summing, take
  // at most this many bytes in all; matrices beyond it get the diagonal only. 0: none.
  int64_t gram_budget = int64_t{1} << 30;
  std::function<void(const std::string&)> log;  // progress lines (may be empty)
};

// Runs the text through `model` and returns its importance matrix: an entry per weight matrix the
// forward pass multiplied, with the probe of its first row. Throws hearth::Error on bad input
// (not UTF-8, fewer tokens than one window of 8, a model placed on a device).
Imatrix collect_imatrix(const std::shared_ptr<const Model>& model, const ImatrixOptions& o);

}  // namespace hearth::calib
