// `--sparse auto` on a model-wide file (model/threshold_choice.h): the file's thresholds are the
// default only where decode through them reads clearly fewer bytes than dense decode. On small
// synthetic SwiGLU models made here, with hand-set thresholds and calibrated input shares.
#include "model/threshold_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"

namespace hearth {
namespace {

// A 128-wide model in `type` with model-wide thresholds and, unless empty, the share of each
// input kind that calibration found they skip, the same in every layer.
std::string model_wide_file(DType type, const std::vector<double>& shares) {
  return test::write_model_wide_model(type, 128, false, shares);
}

// Every matrix of a float model has a copy of its own size that pays, and the down projection's
// axpy over its copy pays below 65% of its rows: with one share s everywhere, a step reads the
// output head, (1 - s) of the other matrices, and (1 - s) of down or all of it (the shares are
// stored as f32).
TEST(ThresholdChoice, FloatFilesReadTheirSharesOfEveryMatrix) {
  for (const double s : {0.3, 0.4, 0.5}) {
    const auto model = Model::load(model_wide_file(DType::F16, {s, s, s, s}));
    const Model::Impl& m = model->impl();
    double rest = 0, down = 0;
    for (const LayerWeights& l : m.weights.layers) {
      for (const Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up}) {
        rest += static_cast<double>(w->bytes());
      }
      down += static_cast<double>(l.ffn_down.bytes());
    }
    const auto head = static_cast<double>(m.weights.output.bytes());
    const double down_read = 1 - s < 0.65 ? (1 - s) * down : down;
    EXPECT_NEAR(threshold_byte_share(m), (head + (1 - s) * rest + down_read) / (head + rest + down),
                1e-6)
        << s;
  }
}

TEST(ThresholdChoice, AutoRunsThresholdsOnlyWhereTheySaveEnoughBytes) {
  // F16 at 50%: about half the bytes.
  {
    const auto model = Model::load(model_wide_file(DType::F16, {0.5, 0.5, 0.5, 0.5}));
    EXPECT_LT(threshold_byte_share(model->impl()), kMaxThresholdByteShare);
    EXPECT_EQ(model->impl().auto_sparse_mode(), SparseMode::Threshold);
    EXPECT_TRUE(model->sparse_note().empty());
  }
  // Q4_0 at these shares: no input-major copy pays (each would read more than 35% of its rows)
  // and the down projection's Q8_0 copy (1.9 times Q4_0's bytes a weight) not at half its rows,
  // so thresholds would read what dense decode reads.
  const std::string q4 = model_wide_file(DType::Q4_0, {0.3, 0.3, 0.4, 0.5});
  const auto model = Model::load(q4);
  EXPECT_DOUBLE_EQ(threshold_byte_share(model->impl()), 1.0);
  EXPECT_EQ(model->impl().auto_sparse_mode(), SparseMode::Dense);
  EXPECT_NE(model->sparse_note().find("dense"), std::string::npos) << model->sparse_note();
  EXPECT_TRUE(model->has_thresholds());
  // So auto sessions run dense, and such a model may hold row groups; the thresholds stay there
  // for sessions that ask for them.
  SessionOptions o;
  o.n_ctx = 32;
  EXPECT_EQ(Session(model, o).sparse_mode(), SparseMode::Dense);
  o.sparse = SparseMode::Threshold;
  EXPECT_EQ(Session(model, o).sparse_mode(), SparseMode::Threshold);
  LoadOptions grouped;
  grouped.row_groups = RowGroups::All;
  const auto with_groups = Model::load(q4, grouped);
  EXPECT_TRUE(with_groups->impl().ffn_row_groups);  // Q4_0 has groups at every level
  EXPECT_TRUE(with_groups->impl().weights.layers.front().ffn_up.row_groups);
}

// Thresholds on attention's inputs read input-major copies made from its rows: asked only for the
// matrices every mode reads whole, such a file keeps its attention's and its FFN's rows.
TEST(ThresholdChoice, AttentionWithThresholdsKeepsItsRows) {
  LoadOptions whole_reads;
  whole_reads.row_groups = RowGroups::WholeReads;
  const auto model = Model::load(model_wide_file(DType::Q4_0, {}), whole_reads);
  EXPECT_EQ(model->impl().auto_sparse_mode(), SparseMode::Threshold);
  const LayerWeights& l = model->impl().weights.layers.front();
  EXPECT_FALSE(l.wq.row_groups || l.wo.row_groups || l.ffn_up.row_groups);
  EXPECT_FALSE(model->impl().ffn_row_groups);
  SessionOptions o;
  o.n_ctx = 32;
  o.sparse = SparseMode::Threshold;
  EXPECT_NO_THROW(Session(model, o));
}

// Files without calibrated shares (made before calibration wrote them, or by hand) keep
// thresholds as auto's mode.
TEST(ThresholdChoice, FilesWithoutSharesKeepTheirThresholds) {
  const auto model = Model::load(model_wide_file(DType::Q4_0, {}));
  EXPECT_EQ(model->impl().auto_sparse_mode(), SparseMode::Threshold);
  EXPECT_TRUE(model->sparse_note().empty());
}

}  // namespace
}  // namespace hearth
