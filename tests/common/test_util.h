// Helpers shared by the test folders: where ../shared is (tests skip cleanly without it), scratch
// files, and running the `hearth` binary as a user would.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hearth/model.h"
#include "hearth/session.h"
#include "model/synth.h"

namespace hearth::test {

// ../shared beside the source tree (or $HEARTH_SHARED_DIR), if it exists.
std::optional<std::string> shared_dir();

// GTEST_SKIP()s the calling test when ../shared is absent; evaluates to the path otherwise.
#define HEARTH_REQUIRE_SHARED(var)                                   \
  const auto var##_opt = ::hearth::test::shared_dir();               \
  if (!var##_opt) GTEST_SKIP() << "../shared is absent";             \
  const std::string var = *var##_opt

// A fresh directory under the build's temp area, removed at process exit.
std::string temp_dir();

std::string read_file(const std::string& path);
// Whitespace-separated token ids (the models' *.ids golden files).
std::vector<int32_t> read_ids(const std::string& path);
void write_file(const std::string& path, const std::string& data);
std::string trim(const std::string& s);
// Splits s at every occurrence of sep (n separators give n + 1 parts).
std::vector<std::string> split(const std::string& s, const std::string& sep);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built `hearth` binary with these arguments (no shell involved); stdin is /dev/null.
CommandResult run_hearth(const std::vector<std::string>& args);
// The same with `input` written to its stdin, which is then closed (interactive commands).
CommandResult run_hearth_with_input(const std::vector<std::string>& args, const std::string& input);
// Runs any program (argv[0], looked up on PATH when it has no '/'), no shell, stdin /dev/null;
// exit code 127 when it cannot be started.
CommandResult run_command(const std::vector<std::string>& argv);

int count_lines(const std::string& s);

// Runs `hearth perplexity -m model -f text <extra>` (expecting success) and returns the value of
// its "PPL = x" line, NaN when there is none.
double cli_perplexity(const std::string& model, const std::string& text,
                      const std::vector<std::string>& extra);

// Greedy generation through the library API: the argmax of the logits, up to n tokens after BOS
// (stopping at an end-of-generation token).
std::vector<int32_t> greedy_ids(const std::shared_ptr<const Model>& model, int n,
                                const SessionOptions& options);

// Deterministic ASCII "words" of about `chars` characters: a synthetic model's vocabulary is
// byte-level, so any such text tokenizes.
std::string random_words(size_t chars, uint32_t seed);

// The logits after `tokens`, fed to a new session in steps of `step` tokens.
std::vector<float> logits_in_steps(const std::shared_ptr<const Model>& model,
                                   const SessionOptions& options,
                                   const std::vector<int32_t>& tokens, size_t step);

// A fixed prompt of n token ids below 292, BOS (1) first: the batch-invariance tests' input.
std::vector<int32_t> fixed_prompt(int n);

// Every position's logits of `tokens`, evaluated in passes of options.n_batch tokens, then the
// logits of one decode step for each of `steps` after them.
std::vector<float> prompt_logits(const std::shared_ptr<const Model>& model,
                                 const SessionOptions& options, const std::vector<int32_t>& tokens,
                                 const std::vector<int32_t>& steps = {});

// Whether two logit vectors are the same bits.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

// A tiny synthetic model's shape (n_embd 64, 2 layers, n_ff 128, 4 heads, 2 KV heads, 300
// tokens) in `type`: decode-loop tests change what they need and write it.
SynthOptions tiny_synth_options(DType type, FfnActivation act = FfnActivation::Silu);

// A small ReGLU model with predictors (n_embd 128, 3 layers, n_ff 352, sparsity 0.8, skew 1.5)
// in `type`, written to `path` with firing frequencies measured on 96 tokens
// (blk.N.ffn_act_freq), as calibration leaves them; returns path.
std::string write_skewed_sparse_model(DType type, const std::string& path);

// A SwiGLU model in `type` (n_ff 2 n_embd + 96) with hand-set model-wide thresholds in the file,
// as calibrate --sparsity writes them; with `relu`, a ReLU model with predictors (whose sessions
// default to them). `shares`, unless empty: the calibrated share of each input kind (q/k/v's, wo's,
// gate/up's, down's) the thresholds skip, the same in every layer. Returns the file's path.
std::string write_model_wide_model(DType type, int64_t n_embd, bool relu = false,
                                   const std::vector<double>& shares = {});

// The CLI's error contract: exit code 1, exactly one line on stderr containing "error" and
// `needle`, nothing on stdout.
void expect_clean_error(const CommandResult& r, const std::string& needle);

}  // namespace hearth::test
