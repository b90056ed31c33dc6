// Matrices of the types with row groups held as them (LoadOptions::row_groups): the groups take the
// file's own bytes (or buffers of their own for a mapped file), sessions compute the function of
// the file's rows up to rounding, with the same bits for any batch size and thread count; a
// sparse model holds only the matrices every mode reads whole, and the sessions and models that
// need single rows keep the file's layout or refuse to open. On small synthetic models made here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/dispatch.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/quant_blocks.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "model/synth.h"

namespace hearth {
namespace {

// A SwiGLU model in `type`, 256 wide (whole super-blocks), its k and v 128 rows (whole groups).
std::string model_file(DType type, FfnActivation act = FfnActivation::Silu) {
  SynthOptions so = test::tiny_synth_options(type, act);
  so.n_embd = 256;
  so.n_ff = 512;
  so.n_ctx = 128;
  if (act == FfnActivation::Relu) {
    so.sparsity = 0.8;
    so.n_embd = 512;  // room for the sparse construction beside 256-weight blocks
  }
  const std::string path = test::temp_dir() + "/row-groups-" + std::string(dtype_name(type)) +
                           (act == FfnActivation::Relu ? "-relu" : "") + ".gguf";
  write_synthetic_model(so, path);
  return path;
}

std::shared_ptr<const Model> load(const std::string& path, bool groups, WeightLoad how,
                                  RowGroups which = RowGroups::All) {
  LoadOptions o;
  o.weights = how;
  o.row_groups = groups ? which : RowGroups::None;
  return Model::load(path, o);
}

bool attention_as_groups(const Model& m) {
  const LayerWeights& l = m.impl().weights.layers.front();
  return l.wq.row_groups && l.wk.row_groups && l.wv.row_groups && l.wo.row_groups;
}
bool ffn_as_groups(const Model& m) {
  const LayerWeights& l = m.impl().weights.layers.front();
  return l.ffn_gate.row_groups && l.ffn_up.row_groups && l.ffn_down.row_groups;
}
bool held_as_groups(const Model& m) { return attention_as_groups(m) && ffn_as_groups(m); }

// Every position's logits of the prompt in passes of n_batch tokens, then four decode steps'.
std::vector<float> logits(const std::shared_ptr<const Model>& m, int32_t n_threads,
                          int32_t n_batch) {
  SessionOptions o;
  o.n_threads = n_threads;
  o.n_ctx = 64;
  o.n_batch = n_batch;
  return test::prompt_logits(m, o, test::fixed_prompt(30), {5, 77, 140, 9});
}

using test::same_bits;

// Whether this CPU's kernel table has row groups for t (some types' pay only with AVX512-VNNI).
bool groups_pay(DType t) {
  return cpu::select_kernels(cpu::detect_isa()).weights(t).gemm_row_groups != nullptr;
}

class RowGroupWeightsOf : public ::testing::TestWithParam<DType> {};

TEST_P(RowGroupWeightsOf, DenseSessionsComputeTheFilesFunctionWithStableBits) {
  const std::string path = model_file(GetParam());
  if (!groups_pay(GetParam())) {
    EXPECT_FALSE(held_as_groups(*load(path, true, WeightLoad::Read)));
    GTEST_SKIP() << "no row groups for " << dtype_name(GetParam()) << " at this CPU's level";
  }
  const std::vector<float> want = logits(load(path, false, WeightLoad::Read), 2, 512);
  // The same model's weights before quantization: how far the quantization moves the logits.
  const std::vector<float> exact =
      logits(load(model_file(DType::F32), false, WeightLoad::Read), 2, 512);
  const auto mean_distance = [](const std::vector<float>& a, const std::vector<float>& b) {
    double sum = 0.0;
    for (size_t i = 0; i < a.size(); ++i) sum += std::fabs(static_cast<double>(a[i]) - b[i]);
    return sum / static_cast<double>(a.size());
  };
  const double quantization = mean_distance(want, exact);
  std::vector<float> read_bits;
  for (const WeightLoad how : {WeightLoad::Read, WeightLoad::Map}) {
    SCOPED_TRACE(how == WeightLoad::Read ? "read" : "mapped");
    const auto grouped = load(path, true, how);
    ASSERT_TRUE(held_as_groups(*grouped));
    // Read into memory, the groups took the file's bytes: no buffer of their own.
    EXPECT_EQ(grouped->impl().grouped.empty(), how == WeightLoad::Read);
    const std::vector<float> got = logits(grouped, 2, 512);
    ASSERT_EQ(got.size(), want.size());
    // A last-bit difference can move an activation's Q8 rounding by one step in the next
    // product, so logits differ by more than the sums' rounding, but far less than by the
    // quantization's.
    const double moved = mean_distance(got, want);
    EXPECT_LT(moved, 0.1 * quantization) << "the quantization moves them " << quantization;
    // The K-quants' groups sum in another order than their rows. A 32-weight type's row kernel
    // may finish each block with one FMA in block order, as its groups do: the same bits.
    if (dtype_block_size(GetParam()) == kQK_K) {
      EXPECT_FALSE(same_bits(got, want)) << "the groups sum in another order";
    }
    for (const int32_t b : {1, 9}) EXPECT_TRUE(same_bits(logits(grouped, 2, b), got)) << "-b " << b;
    EXPECT_TRUE(same_bits(logits(grouped, 1, 512), got)) << "one thread";
    if (read_bits.empty()) {
      read_bits = got;
    } else {
      EXPECT_TRUE(same_bits(got, read_bits)) << "mapped and read";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RowGroupWeightsOf,
                         ::testing::Values(DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K, DType::IQ4_XS, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::IQ4_NL),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(RowGroupWeights, SparseSessionsRefuseThem) {
  const auto grouped = load(model_file(DType::Q2_K), true, WeightLoad::Read);
  ASSERT_TRUE(held_as_groups(*grouped));
  SessionOptions o;
  o.sparse = SparseMode::Oracle;
  EXPECT_THROW(Session(grouped, o), Error);
  o.sparse = SparseMode::Dense;
  EXPECT_NO_THROW(Session(grouped, o));
}

TEST(RowGroupWeights, OnlyModelsItSuitsHoldThem) {
  EXPECT_FALSE(held_as_groups(*load(model_file(DType::Q8_0), true, WeightLoad::Read)))
      << "a type without row groups";
  EXPECT_FALSE(
      held_as_groups(*load(model_file(DType::F16, FfnActivation::Relu), true, WeightLoad::Read)))
      << "float matrices keep their rows";
  EXPECT_FALSE(held_as_groups(*load(model_file(DType::Q2_K), false, WeightLoad::Read)))
      << "not asked";
  const auto whole_reads =
      load(model_file(DType::Q2_K), true, WeightLoad::Read, RowGroups::WholeReads);
  EXPECT_TRUE(attention_as_groups(*whole_reads));
  EXPECT_FALSE(ffn_as_groups(*whole_reads)) << "only the matrices every mode reads whole";
}

// A model whose sessions default to the predictors holds its attention as groups and its FFN as
// rows, asked for every matrix or for the whole-read ones: every mode opens, dense and oracle
// sessions compute the rows' function up to rounding, and the predictor's logits are the same
// bits for any batch size and thread count.
TEST(RowGroupWeights, SparseModelsHoldTheirAttentionAsGroups) {
  if (!groups_pay(DType::Q4_K)) GTEST_SKIP() << "no Q4_K row groups at this CPU's level";
  const std::string path = model_file(DType::Q4_K, FfnActivation::Relu);
  const auto rows = load(path, false, WeightLoad::Read);
  ASSERT_EQ(rows->impl().auto_sparse_mode(), SparseMode::Predictor);
  for (const RowGroups which : {RowGroups::All, RowGroups::WholeReads}) {
    const auto grouped = load(path, true, WeightLoad::Read, which);
    ASSERT_TRUE(attention_as_groups(*grouped));
    ASSERT_FALSE(ffn_as_groups(*grouped));
    EXPECT_FALSE(grouped->impl().ffn_row_groups);
    const auto mode_logits = [&](const std::shared_ptr<const Model>& m, SparseMode mode,
                                 int32_t n_threads, int32_t n_batch) {
      SessionOptions o;
      o.sparse = mode;
      o.n_threads = n_threads;
      o.n_ctx = 64;
      o.n_batch = n_batch;
      return test::prompt_logits(m, o, test::fixed_prompt(30), {5, 77, 140, 9});
    };
    const auto max_distance = [](const std::vector<float>& a, const std::vector<float>& b) {
      float most = 0.0f;
      for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::fabs(a[i] - b[i]));
      return most;
    };
    // Logits of order 1; Q8 activations and Q4_K weights round them by a few hundredths.
    const std::vector<float> dense = mode_logits(grouped, SparseMode::Dense, 2, 512);
    const std::vector<float> dense_rows = mode_logits(rows, SparseMode::Dense, 2, 512);
    EXPECT_FALSE(same_bits(dense, dense_rows)) << "the K-quants' groups sum in another order";
    EXPECT_LT(max_distance(dense, dense_rows), 0.1f);
    EXPECT_LT(max_distance(mode_logits(grouped, SparseMode::Oracle, 2, 512), dense), 0.1f);
    const std::vector<float> predicted = mode_logits(grouped, SparseMode::Predictor, 2, 512);
    for (const int32_t b : {1, 9}) {
      EXPECT_TRUE(same_bits(mode_logits(grouped, SparseMode::Predictor, 2, b), predicted))
          << "-b " << b;
    }
    EXPECT_TRUE(same_bits(mode_logits(grouped, SparseMode::Predictor, 1, 512), predicted));
  }
}

}  // namespace
}  // namespace hearth
