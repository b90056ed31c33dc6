// Predictors held in Q8_0 (model/predictor_q8.h, LoadOptions::q8_predictors): each float predictor
// row becomes the Q8_0 row of its values, in the order the model holds its neurons, for mapped
// files and files read into memory alike; predictor-mode decode reads fewer bytes and picks
// nearly the same neurons.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "core/quantize.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/model_impl.h"

namespace hearth {
namespace {

std::string sparse_model(DType type) {
  return test::write_skewed_sparse_model(
      type, test::temp_dir() + "/pred-q8-" + std::string(dtype_name(type)) + ".gguf");
}

std::shared_ptr<const Model> load(const std::string& path, bool q8, bool mmap) {
  LoadOptions o;
  o.weights = mmap ? WeightLoad::Map : WeightLoad::Read;
  o.reorder_neurons = true;  // fc2's rows follow the held order, before the conversion
  o.q8_predictors = q8;
  return Model::load(path, o);
}

// The Q8_0 row of a float row's values.
std::vector<uint8_t> q8_row(const Matrix& w, int64_t r) {
  std::vector<float> f(static_cast<size_t>(w.cols));
  dequantize_row(w.type, w.row(r), f.data(), w.cols);
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes(DType::Q8_0, w.cols)));
  quantize_row(DType::Q8_0, f.data(), out.data(), w.cols);
  return out;
}

TEST(PredictorQ8, RowsAreTheQ8_0RowsOfTheFileValues) {
  for (DType type : {DType::F16, DType::F32}) {
    const std::string path = sparse_model(type);
    const auto file = load(path, false, true);
    for (bool mmap : {true, false}) {
      const auto held = load(path, true, mmap);
      const auto& want = file->impl().weights.layers;
      const auto& got = held->impl().weights.layers;
      ASSERT_EQ(want.size(), got.size());
      int converted = 0;
      for (size_t il = 0; il < want.size(); ++il) {
        for (const auto& [a, b] :
             {std::pair{&want[il].fc1, &got[il].fc1}, std::pair{&want[il].fc2, &got[il].fc2}}) {
          ASSERT_TRUE(a->present());
          ASSERT_EQ(a->rows, b->rows);
          if (a->cols % 32 != 0) {
            EXPECT_EQ(b->type, a->type);  // rows that are not whole blocks keep their type
            continue;
          }
          ++converted;
          ASSERT_EQ(b->type, DType::Q8_0) << "layer " << il;
          for (int64_t r = 0; r < a->rows; ++r) {
            const std::vector<uint8_t> row = q8_row(*a, r);
            ASSERT_EQ(std::memcmp(b->row(r), row.data(), row.size()), 0)
                << dtype_name(type) << (mmap ? " mapped" : " read") << " layer " << il << " row "
                << r;
          }
        }
      }
      EXPECT_GT(converted, 0);
    }
  }
}

// Prompt and four greedy steps in predictor mode: fewer weight bytes read, the same tokens, and
// the logits near the float predictors' (a neuron whose score moves across the threshold changes
// them a little).
TEST(PredictorQ8, DecodesLikeTheFloatPredictors) {
  const std::string path = sparse_model(DType::F16);
  const auto run = [&](bool q8) {
    const auto m = load(path, q8, false);
    SessionOptions o;
    o.sparse = SparseMode::Predictor;
    o.n_ctx = 64;
    o.n_threads = 2;
    Session s(m, o);
    std::vector<int32_t> tokens = {1, 17, 42, 99, 7, 250, 3, 64};
    auto out = s.eval(tokens);
    for (int i = 0; i < 4; ++i) {
      const auto t = static_cast<int32_t>(std::max_element(out.begin(), out.end()) - out.begin());
      tokens.push_back(t);
      out = s.eval({&t, 1});
    }
    return std::tuple{tokens, std::vector<float>(out.begin(), out.end()), s.sparse_stats()};
  };
  const auto [tokens_f, logits_f, stats_f] = run(false);
  const auto [tokens_q, logits_q, stats_q] = run(true);
  EXPECT_EQ(tokens_q, tokens_f);
  EXPECT_LT(stats_q.weight_bytes, stats_f.weight_bytes);
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < logits_f.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(logits_q[i] - logits_f[i])));
    norm = std::max(norm, static_cast<double>(std::fabs(logits_f[i])));
  }
  EXPECT_LT(diff, 0.05 * norm);
}

}  // namespace
}  // namespace hearth
