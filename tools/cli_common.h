// Shared plumbing of the subcommands: one error policy (a single clear line on stderr, non-zero
// exit, never a crash) and flags that several commands accept the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hearth/model.h"
#include "hearth/sampling.h"
#include "hearth/session.h"

namespace hearth::cli {

// Parses argv with `app`, then runs `body`. CLI11 errors, hearth::Error and std::exception become
// "hearth <command>: error: ..." and exit code 1; --help prints usage and exits 0.
int run_app(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// --mmap / --no-mmap (LoadOptions::weights): map the file, read it into memory, or (neither)
// let the loader choose.
struct WeightFlags {
  bool mmap = false;
  bool no_mmap = false;
  void add_to(CLI::App& app);
  WeightLoad load() const;
};

// -t/--threads, -c/--ctx-size, -b/--batch-size, --kv-type, --no-mmap, --no-reorder,
// --float-predictors, --keep-matrices, --no-repack, --sparse MODE, --sparse-threshold F,
// --dense-prompt,
// --sparse-prompt
struct SessionFlags {
  int32_t n_threads = 0;
  int32_t n_ctx = 0;
  int32_t n_batch = 512;
  std::string kv_type = "f16";
  WeightFlags weights;
  bool no_reorder = false;  // keep FFN neurons in the file's order (LoadOptions::reorder_neurons)
  bool float_predictors = false;  // keep the file's float predictors (LoadOptions::q8_predictors)
  bool keep_matrices = false;     // LoadOptions::input_major_only off
  bool no_repack = false;         // LoadOptions::row_groups off
  // --sparse MODE (dense, oracle, predictor, threshold, auto), checked with parse_sparse_mode while the
  // flags are parsed; empty means auto. Only commands that add it as repeatable (bench) may get
  // more than one.
  std::vector<std::string> sparse;
  float sparse_threshold = std::numeric_limits<float>::quiet_NaN();  // NaN: the model's
  bool dense_prompt = false;   // SessionOptions::sparse_prompt = false
  bool sparse_prompt = false;  // SessionOptions::sparse_prompt = true (neither: automatic)

  // Adds the flags to `app`. sparse_repeatable: --sparse may be given several times (bench).
  void add_to(CLI::App& app, bool sparse_repeatable = false);
  // The options of the first (or only) --sparse mode.
  SessionOptions options() const;
  // Every --sparse mode in the order given ({Auto} when none was).
  std::vector<SparseMode> sparse_modes() const;
};

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed (run, chat).
struct SamplingFlags {
  SamplerParams params;
  int64_t seed = -1;  // -1: a fresh random seed on every run

  void add_to(CLI::App& app);
  // The parameters with the seed drawn when it is -1; Error when one is out of range.
  SamplerParams resolve() const;
};

// The stderr line that says what was loaded: architecture, sizes, context, threads, sparse mode
// and the load time.
void print_load_info(const std::string& model_path, const Model& model, const Session& session,
                     double load_seconds);

// The whole file (binary-safe); `what` names it in the error ("text file", "prompt file").
std::string read_text_file(const std::string& path, const char* what);

// The prompt text of -p TEXT or -f FILE (exactly one may be given; neither means empty).
std::string read_prompt(const std::string& text, const std::string& file);

// Default thread count: the machine's hardware threads (at least 1).
int32_t default_threads();

}  // namespace hearth::cli
