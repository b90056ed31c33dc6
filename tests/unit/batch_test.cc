// Multi-sequence sessions (Session::eval_batch): sequences batched together give what each gives
// alone (bit for bit in dense mode, within rounding and with the same greedy tokens in the sparse
// modes) in every architecture family; per-sequence truncate and reset; bad batches refused with
// one clear line and nothing evaluated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/synth.h"
#include "unit/arch_models.h"

namespace hearth {
namespace {

constexpr int kGen = 32;

std::string synth(const std::string& name, DType type, bool sparse) {
  SynthOptions o = test::tiny_synth_options(type, sparse ? FfnActivation::Relu : FfnActivation::Silu);
  o.n_ff = 256;
  if (sparse) o.sparsity = 0.8;
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  write_synthetic_model(o, path);
  return path;
}

SessionOptions options(SparseMode mode, int32_t n_seq) {
  SessionOptions o;
  o.n_ctx = 96;
  o.n_threads = 2;
  o.n_seq = n_seq;
  o.sparse = mode;
  return o;
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A sequence of the test: its prompt, and the step at which it joins the batch.
struct Script {
  std::vector<int32_t> prompt;
  int start = 0;
};

// Prompts of 2, 5, 11 and 17 tokens (two take the sparse decode path, two the prompt path),
// joining at different steps so that prompts share passes with other sequences' decode tokens.
std::vector<Script> scripts() {
  std::vector<Script> s;
  const int lengths[] = {2, 5, 11, 17}, starts[] = {0, 0, 3, 7};
  for (int i = 0; i < 4; ++i) {
    Script sc{{1}, starts[i]};
    for (int j = 1; j < lengths[i]; ++j) sc.prompt.push_back(2 + (i * 37 + j * 11) % 250);
    s.push_back(sc);
  }
  return s;
}

// What one sequence produced: the greedy tokens and the logits each was picked from.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [kGen, n_vocab]
};

Trace alone(const std::shared_ptr<const Model>& model, SparseMode mode, const Script& sc) {
  Session s(model, options(mode, 1));
  Trace tr;
  auto logits = s.eval(sc.prompt);
  for (int i = 0; i < kGen; ++i) {
    tr.logits.insert(tr.logits.end(), logits.begin(), logits.end());
    tr.tokens.push_back(argmax(logits));
    if (i + 1 < kGen) logits = s.eval({&tr.tokens.back(), 1});
  }
  return tr;
}

// Every sequence in one session: each step one eval_batch over the sequences that have started
// (a whole prompt when a sequence joins, then its last token) until each has kGen tokens.
std::vector<Trace> batched(const std::shared_ptr<const Model>& model, SparseMode mode,
                           const std::vector<Script>& scs, SparseStats* stats = nullptr) {
  const auto n = static_cast<int32_t>(scs.size());
  const auto n_vocab = static_cast<size_t>(model->config().n_vocab);
  Session s(model, options(mode, n));
  std::vector<Trace> tr(scs.size());
  std::vector<float> logits(scs.size() * n_vocab);
  for (int step = 0;; ++step) {
    std::vector<SeqTokens> batch;
    for (int32_t i = 0; i < n; ++i) {
      const Trace& t = tr[static_cast<size_t>(i)];
      if (step < scs[i].start || t.tokens.size() == static_cast<size_t>(kGen)) continue;
      if (step == scs[i].start) {
        batch.push_back({i, scs[i].prompt});
      } else {
        batch.push_back({i, {&t.tokens.back(), 1}});
      }
    }
    if (batch.empty()) break;
    s.eval_batch(batch, logits);
    for (size_t b = 0; b < batch.size(); ++b) {
      Trace& t = tr[static_cast<size_t>(batch[b].seq)];
      const std::span<const float> row(logits.data() + b * n_vocab, n_vocab);
      t.logits.insert(t.logits.end(), row.begin(), row.end());
      t.tokens.push_back(argmax(row));
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    EXPECT_EQ(s.n_past(i), static_cast<int32_t>(scs[i].prompt.size()) + kGen - 1) << "sequence " << i;
  }
  if (stats) *stats = s.sparse_stats();
  return tr;
}

// max |a - b| relative to the largest |b|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 1e-12;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

// tolerance 0: bit-identical logits.
void expect_batched_equals_alone(const std::string& path, SparseMode mode, double tolerance) {
  SCOPED_TRACE(path + " " + to_string(mode));
  const auto model = Model::load(path);
  const auto scs = scripts();
  SparseStats stats;
  const auto got = batched(model, mode, scs, &stats);
  for (size_t i = 0; i < scs.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    const Trace want = alone(model, mode, scs[i]);
    EXPECT_EQ(got[i].tokens, want.tokens);
    ASSERT_EQ(got[i].logits.size(), want.logits.size());
    if (tolerance == 0) {
      EXPECT_EQ(std::memcmp(got[i].logits.data(), want.logits.data(), want.logits.size() * 4), 0)
          << "relative difference " << rel_diff(got[i].logits, want.logits);
    } else {
      EXPECT_LT(rel_diff(got[i].logits, want.logits), tolerance);
    }
  }
  if (mode != SparseMode::Dense) {
    EXPECT_LT(stats.neurons_active, stats.neurons_total);
  }
}

TEST(SessionBatch, DenseBatchedIsBitIdenticalToAlone) {
  for (const DType type : {DType::F32, DType::F16, DType::Q4_0}) {
    expect_batched_equals_alone(synth("dense-" + std::string(dtype_name(type)), type, false),
                                SparseMode::Dense, 0);
  }
}

// The union of the batch's active neurons can move a token's down projection from the axpy to the
// dense kernel (or back): the same terms summed in another order, so float rounding apart.
TEST(SessionBatch, SparseBatchedMatchesAloneWithinRounding) {
  const std::string path = synth("relu-f16", DType::F16, true);
  expect_batched_equals_alone(path, SparseMode::Predictor, 0);
  expect_batched_equals_alone(path, SparseMode::Oracle, 0);
  expect_batched_equals_alone(path, SparseMode::Dense, 0);
}

TEST(SessionBatch, FalconAndOptBatchedAreBitIdenticalToAlone) {
  using namespace arch_test;
  for (const TinyModel& m : {make_falcon(false, true, 2), make_opt(false)}) {
    expect_batched_equals_alone(m.write(m.arch + "-batch.gguf"), SparseMode::Dense, 0);
  }
  TinyModel opt = make_opt(true);  // ReLU with predictors: the sparse paths with biases
  expect_batched_equals_alone(opt.write("opt-pwri-batch.gguf"), SparseMode::Oracle, 1e-5);
}

TEST(SessionBatch, TruncateAndResetActOnOneSequence) {
  const auto model = Model::load(synth("dense-trunc", DType::F32, false));
  Session s(model, options(SparseMode::Dense, 2));
  const std::vector<int32_t> a = {1, 5, 9, 13, 17}, b = {21, 25, 29};
  std::vector<int32_t> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  const auto n_vocab = static_cast<size_t>(model->config().n_vocab);
  std::vector<float> logits(2 * n_vocab);
  const std::vector<SeqTokens> both = {{0, ab}, {1, a}};
  s.eval_batch(both, logits);
  const std::vector<float> want(logits.begin(), logits.begin() + static_cast<long>(n_vocab));
  EXPECT_EQ(s.n_past(0), 8);
  EXPECT_EQ(s.n_past(1), 5);

  // Keep a, evaluate b again: the cache of a is reused and the logits are the same.
  s.truncate(0, static_cast<int32_t>(a.size()));
  EXPECT_EQ(s.n_past(0), 5);
  const SeqTokens again{0, b};
  s.eval_batch({&again, 1}, logits);
  EXPECT_EQ(std::memcmp(logits.data(), want.data(), n_vocab * 4), 0);
  EXPECT_EQ(s.n_past(0), 8);

  s.reset(1);
  EXPECT_EQ(s.n_past(1), 0);
  EXPECT_EQ(s.n_past(0), 8);
  s.reset();  // sequence 0
  EXPECT_EQ(s.n_past(), 0);
  EXPECT_THROW(s.truncate(1, 1), Error);  // more than it holds
  EXPECT_THROW(s.truncate(2, 0), Error);
  EXPECT_THROW(s.n_past(-1), Error);
}

// The message of the Error that f throws, "" when none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SessionBatch, BadBatchesAreRefusedWithOneLine) {
  const auto model = Model::load(synth("dense-err", DType::F32, false));
  SessionOptions o = options(SparseMode::Dense, 3);
  o.n_ctx = 16;
  o.n_batch = 12;
  Session s(model, o);
  const auto n_vocab = static_cast<size_t>(model->config().n_vocab);
  std::vector<float> logits(3 * n_vocab);
  const std::vector<int32_t> four = {1, 2, 3, 4}, ten(10, 7), bad = {1, 300};
  auto eval = [&](std::vector<SeqTokens> batch, size_t n_logits = 0) {
    return error_of([&] {
      s.eval_batch(batch, std::span(logits).first(n_logits ? n_logits : logits.size()));
    });
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {eval({{3, four}}), "sequence 3 is out of range [0, 3)"},
      {eval({{-1, four}}), "sequence -1 is out of range"},
      {eval({{0, four}, {1, four}, {0, four}}), "sequence 0 appears twice"},
      {eval({{1, {}}}), "the chunk of sequence 1 is empty"},
      {eval({}), "the batch is empty"},
      {eval({{0, ten}, {1, four}}), "14 tokens in one batch; the session takes at most n_batch = 12"},
      {eval({{2, bad}}), "token id 300 is out of range"},
      {eval({{0, four}, {1, four}}, n_vocab), "the output holds"},
  };
  for (const auto& [got, want] : cases) {
    EXPECT_NE(got.find(want), std::string::npos) << "got: " << got << "\nwant: " << want;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(s.n_past(i), 0) << "a refused batch evaluated tokens";

  s.eval_batch(std::vector<SeqTokens>{{1, ten}}, logits);
  const std::string full = eval({{0, four}, {1, std::span(ten).first(7)}});
  EXPECT_NE(full.find("cannot evaluate 7 tokens in sequence 1: the context holds 10 of 16"),
            std::string::npos)
      << full;
  EXPECT_EQ(s.n_past(0), 0);
  EXPECT_NE(error_of([&] {
              SessionOptions z = o;
              z.n_seq = 0;
              Session bad_session(model, z);
            }).find("at least 1 sequence"),
            std::string::npos);
}

}  // namespace
}  // namespace hearth
