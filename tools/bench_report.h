// The results of `hearth bench`, one row per --sparse mode, and their md / csv / json output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::cli {

struct BenchRow {
  std::string model;             // file name
  std::string sparse;            // resolved mode (never "auto")
  std::string sparse_requested;  // as given on the command line
  double sparse_threshold = 0;   // predictor threshold in effect (NaN when not set)
  int32_t n_prompt = 0, n_gen = 0, threads = 0, repetitions = 0;
  int32_t n_depth = 0;  // tokens already in the context when each test starts
  double pp_mean = 0, pp_sd = 0, pp_gflops = 0;
  double tg_mean = 0, tg_sd = 0;
  double sparsity = 0;           // of the tg phase
  double input_sparsity = 0;     // of the tg phase: thresholded weights skipped (Threshold mode)
  bool measured_bytes = false;   // bytes_per_token from SparseStats (else the dense estimate)
  double bytes_per_token = 0;    // weights + KV cache per generated token
  double bandwidth_gbs = 0;      // 0 when not measured
  double roofline = 0;           // tokens/s the bandwidth allows
  double roofline_fraction = 0;  // tg_mean / roofline
  std::string device;            // the device holding part of the model ("" when CPU only)
  uint64_t device_bytes = 0;     // device memory in use
  double device_busy = 0;        // share of tg time the device was busy (--trace), else 0
  bool weights_in_memory = false;  // read into memory (WeightLoad::Read or Auto), not mapped
};

// Prints `rows` in `format` ("md", "csv" or "json") to stdout. Rows after the first also get their
// pp and tg speed ratios against the first.
void print_bench(const std::vector<BenchRow>& rows, const std::string& format);

}  // namespace hearth::cli
