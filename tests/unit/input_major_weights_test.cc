// A model-wide float model whose projections are held only as their input-major copies
// (LoadOptions::input_major_only): every session computes the same bits as with the file's
// matrices kept, the copies take the file's own bytes, and the models it does not suit keep their
// matrices. On small synthetic SwiGLU models made here, with hand-set model-wide thresholds.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"

namespace hearth {
namespace {

std::string model_wide_file(DType type, int64_t n_embd = 128, bool relu = false) {
  return test::write_model_wide_model(type, n_embd, relu);
}

std::shared_ptr<const Model> load(const std::string& path, bool copies_only, WeightLoad how) {
  LoadOptions o;
  o.weights = how;
  o.input_major_only = copies_only;
  o.input_major_min_width = 0;
  return Model::load(path, o);
}

bool held_input_major(const Model& m) {
  const LayerWeights& l = m.impl().weights.layers.front();
  return l.wq.input_major && l.wk.input_major && l.wv.input_major && l.wo.input_major &&
         l.ffn_gate.input_major && l.ffn_up.input_major;
}

// Every position's logits of the prompt in passes of n_batch tokens, then four decode steps'.
std::vector<float> logits(const std::shared_ptr<const Model>& m, SessionOptions o,
                          int32_t n_batch) {
  o.n_batch = n_batch;
  return test::prompt_logits(m, o, test::fixed_prompt(30), {5, 77, 140, 9});
}

using test::same_bits;

// An input whose calibrated share is 0 gets no copy (one read in full is slower than the file's
// matrix): its matrices stay the file's, the others are held as copies, and threshold sessions
// give the bits of the model that keeps every matrix.
TEST(InputMajorWeights, InputsThatSkipNothingKeepTheirMatrices) {
  const std::string path =
      test::write_model_wide_model(DType::F16, 128, false, {0.0, 0.0, 0.4, 0.6});
  const auto kept = load(path, false, WeightLoad::Read);
  const auto held = load(path, true, WeightLoad::Read);
  const LayerWeights& l = held->impl().weights.layers.front();
  EXPECT_FALSE(l.wq.input_major || l.wk.input_major || l.wv.input_major || l.wo.input_major);
  EXPECT_TRUE(l.ffn_gate.input_major && l.ffn_up.input_major);
  SessionOptions o;
  o.n_threads = 2;
  o.n_ctx = 64;
  o.input_major_min_width = 0;
  o.sparse = SparseMode::Threshold;
  for (const int32_t b : {1, 9}) {
    EXPECT_TRUE(same_bits(logits(kept, o, b), logits(held, o, b))) << "-b " << b;
  }
}

TEST(InputMajorWeights, EverySessionGivesTheBitsOfTheFilesMatrices) {
  for (const DType type : {DType::F32, DType::F16}) {
    const std::string path = model_wide_file(type);
    for (const WeightLoad how : {WeightLoad::Read, WeightLoad::Map}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + (how == WeightLoad::Read ? " read" : " mapped"));
      const auto kept = load(path, false, how);
      const auto held = load(path, true, how);
      ASSERT_FALSE(held_input_major(*kept));
      ASSERT_TRUE(held_input_major(*held));
      // q, k and v lie one after another in the file: they share one copy, each a view of it.
      const LayerWeights& l = held->impl().weights.layers.front();
      EXPECT_GT(l.wq.stride, 0);
      EXPECT_EQ(l.wq.data, held->impl().input_major().layers.front().wqkv_t.data);
      // Read into memory, the copies were written over the file's matrices: no buffer of their own.
      EXPECT_EQ(held->impl().input_major().storage.empty(), how == WeightLoad::Read);
      SessionOptions o;
      o.n_threads = 2;
      o.n_ctx = 64;
      o.input_major_min_width = 0;
      for (const SparseMode mode : {SparseMode::Auto, SparseMode::Dense}) {
        for (const bool sparse_prompt : {true, false}) {
          o.sparse = mode;
          o.sparse_prompt = sparse_prompt;
          for (const int32_t b : {1, 9, 512}) {
            EXPECT_TRUE(same_bits(logits(kept, o, b), logits(held, o, b)))
                << to_string(mode) << " sparse_prompt " << sparse_prompt << " -b " << b;
          }
        }
      }
      o.sparse = SparseMode::Auto;
      o.sparse_prompt = true;
      Session s(held, o);
      EXPECT_EQ(s.sparse_mode(), SparseMode::Threshold);
      s.eval(test::fixed_prompt(30));
      EXPECT_GT(s.sparse_stats().input_sparsity(), 0.1) << "the inputs are thresholded";
      o.n_threads = 1;
      EXPECT_TRUE(same_bits(logits(kept, o, 512), logits(held, o, 512))) << "one thread";
    }
  }
}

TEST(InputMajorWeights, OnlyModelsItSuitsHoldTheCopies) {
  EXPECT_FALSE(held_input_major(*load(model_wide_file(DType::BF16), true, WeightLoad::Read)))
      << "BF16's copies are F32: not the file's bytes";
  EXPECT_FALSE(held_input_major(*load(model_wide_file(DType::Q8_0), true, WeightLoad::Read)))
      << "quantized copies round again";
  EXPECT_FALSE(held_input_major(
      *load(model_wide_file(DType::F32, 128, /*relu=*/true), true, WeightLoad::Read)))
      << "sessions default to the predictors";
  SynthOptions so = test::tiny_synth_options(DType::F32);
  const std::string plain = test::temp_dir() + "/no-thresholds.gguf";
  write_synthetic_model(so, plain);
  EXPECT_FALSE(held_input_major(*load(plain, true, WeightLoad::Read))) << "no thresholds";
  LoadOptions narrow;
  narrow.input_major_only = true;
  ASSERT_LT(128, narrow.input_major_min_width);
  EXPECT_FALSE(held_input_major(*Model::load(model_wide_file(DType::F32), narrow)))
      << "narrower than input_major_min_width";
}

}  // namespace
}  // namespace hearth
