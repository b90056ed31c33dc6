// Importance matrices: `hearth imatrix`'s statistics (calib/imatrix.h) are the mean squares of the
// rows each weight matrix multiplies, the file round-trips in llama.cpp's layout, and quantize
// refuses an imatrix that is missing, malformed or another model's with one clear line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "calib/imatrix.h"
#include "common/test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "model/imatrix_file.h"
#include "model/quantize_model.h"
#include "model/synth.h"

namespace hearth {
namespace {

std::string make_model(const std::string& dir, const std::string& name, uint64_t seed) {
  SynthOptions o = test::tiny_synth_options(DType::F32);
  o.seed = seed;
  const std::string path = dir + "/" + name + ".gguf";
  write_synthetic_model(o, path);
  return path;
}

// Text the tiny synthetic vocabulary tokenizes into many tokens.
std::string some_text() {
  std::string s;
  for (int i = 0; i < 400; ++i) s += "the cat sat on a mat and ran " + std::to_string(i % 17) + ". ";
  return s;
}

calib::ImatrixOptions options() {
  calib::ImatrixOptions o;
  o.text = some_text();
  o.dataset_name = "some.txt";
  o.window = 32;
  o.max_tokens = 256;
  o.n_threads = 2;
  return o;
}

TEST(Imatrix, EntriesAreTheMeanSquaresOfEachMatrixInput) {
  const std::string dir = test::temp_dir();
  const auto model = Model::load(make_model(dir, "a", 1));
  const Imatrix m = calib::collect_imatrix(model, options());
  EXPECT_EQ(m.chunk_size, 32u);
  EXPECT_EQ(m.chunk_count, 8u);
  ASSERT_EQ(m.datasets, std::vector<std::string>{"some.txt"});
  // Every projection of every layer and the output; not token_embd (looked up, not multiplied).
  for (const char* kind : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                           "ffn_down"}) {
    for (int il = 0; il < 2; ++il) {
      const std::string name = "blk." + std::to_string(il) + "." + kind + ".weight";
      ASSERT_EQ(m.entries.count(name), 1u) << name;
      // 8 windows of 32 tokens, each after a BOS.
      EXPECT_EQ(m.entries.at(name).count, 8 * 33) << name;
      EXPECT_EQ(m.entries.at(name).probe.size(), 64u) << name;
    }
  }
  EXPECT_EQ(m.entries.count("token_embd.weight"), 0u);
  const bool has_output = m.entries.count("output.weight") == 1;
  EXPECT_TRUE(has_output || m.entries.count("token_embd.weight") == 1);
  // q, k and v multiply the same rows.
  EXPECT_EQ(m.entries.at("blk.1.attn_q.weight").sum2, m.entries.at("blk.1.attn_v.weight").sum2);
  for (const float v : m.entries.at("blk.0.ffn_down.weight").sum2) EXPECT_TRUE(std::isfinite(v));
}

TEST(Imatrix, FileRoundTripsAndQuantizeUsesIt) {
  const std::string dir = test::temp_dir();
  const std::string src = make_model(dir, "a", 1);
  const Imatrix m = calib::collect_imatrix(Model::load(src), options());
  const std::string path = dir + "/a.imatrix.gguf";
  write_imatrix(m, path);
  const auto f = gguf::GgufFile::open(path);
  EXPECT_EQ(f->get_string("general.type"), "imatrix");
  EXPECT_NE(f->find_tensor("blk.0.attn_q.weight.in_sum2"), nullptr);
  EXPECT_NE(f->find_tensor("blk.0.attn_q.weight.counts"), nullptr);
  const Imatrix back = read_imatrix(path);
  ASSERT_EQ(back.entries.size(), m.entries.size());
  EXPECT_EQ(back.chunk_count, m.chunk_count);
  for (const auto& [name, e] : m.entries) {
    EXPECT_EQ(back.entries.at(name).sum2, e.sum2) << name;
    EXPECT_EQ(back.entries.at(name).count, e.count) << name;
    EXPECT_EQ(back.entries.at(name).probe, e.probe) << name;
  }
  QuantizeOptions o;
  o.imatrix = path;
  o.output_type = DType::Q8_0;
  const QuantizeReport r = quantize_model(src, dir + "/a-q4_0.gguf", DType::Q4_0, o);
  EXPECT_EQ(r.imatrix_entries, static_cast<int64_t>(m.entries.size()));
  EXPECT_EQ(r.imatrix_gptq, 2 * 7);     // q, k, v, o, gate, up, down of each layer
  EXPECT_EQ(r.imatrix_weighted, 0);
  EXPECT_EQ(r.imatrix_unweighted, 1);   // token_embd: looked up, never multiplied
  EXPECT_NO_THROW(Model::load(dir + "/a-q4_0.gguf"));
  // Without Gram matrices (a llama.cpp imatrix): the search weighted by the mean squares.
  Imatrix diagonal = m;
  for (auto& [name, e] : diagonal.entries) e.gram.clear();
  write_imatrix(diagonal, path);
  const QuantizeReport d = quantize_model(src, dir + "/a-q4_0-diag.gguf", DType::Q4_0, o);
  EXPECT_EQ(d.imatrix_gptq, 0);
  EXPECT_EQ(d.imatrix_weighted, 2 * 7);
  EXPECT_NO_THROW(Model::load(dir + "/a-q4_0-diag.gguf"));
}

TEST(Imatrix, AnotherModelsImatrixIsRefused) {
  const std::string dir = test::temp_dir();
  const std::string a = make_model(dir, "a", 1), b = make_model(dir, "b", 2);
  const std::string path = dir + "/b.imatrix.gguf";
  write_imatrix(calib::collect_imatrix(Model::load(b), options()), path);
  QuantizeOptions o;
  o.imatrix = path;
  try {
    quantize_model(a, dir + "/out.gguf", DType::Q4_0, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  // Another shape: an entry with the wrong number of columns.
  Imatrix wrong = read_imatrix(path);
  wrong.entries.at("blk.0.attn_q.weight").sum2.resize(48);
  wrong.entries.at("blk.0.attn_q.weight").probe.clear();
  wrong.entries.at("blk.0.attn_q.weight").gram.clear();
  write_imatrix(wrong, path);
  EXPECT_THROW(quantize_model(a, dir + "/out.gguf", DType::Q4_0, o), Error);
}

TEST(Imatrix, BadFilesGiveOneLineErrors) {
  const std::string dir = test::temp_dir();
  const std::string src = make_model(dir, "a", 1);
  // Missing file, a model instead of an imatrix, sums without counts.
  const auto missing = test::run_hearth({"quantize", src, dir + "/o.gguf", "q4_0", "--imatrix",
                                         dir + "/none.gguf"});
  test::expect_clean_error(missing, "none.gguf");
  const auto model = test::run_hearth({"quantize", src, dir + "/o.gguf", "q4_0", "--imatrix", src});
  test::expect_clean_error(model, "not an importance matrix");
  gguf::GgufWriter w;
  w.set_string("general.type", "imatrix");
  const std::vector<float> sums(64, 1.0f);
  w.add_tensor("blk.0.attn_q.weight.in_sum2", 0, std::vector<int64_t>{64}, sums.data(),
               sums.size() * sizeof(float));
  w.write(dir + "/partial.gguf");
  const auto partial = test::run_hearth({"quantize", src, dir + "/o.gguf", "q4_0", "--imatrix",
                                         dir + "/partial.gguf"});
  test::expect_clean_error(partial, "counts");
  // The collector's own errors: a text shorter than one window.
  const auto short_text = dir + "/short.txt";
  test::write_file(short_text, "the cat");
  const auto r = test::run_hearth({"imatrix", "-m", src, "-f", short_text, "-o", dir + "/i.gguf"});
  test::expect_clean_error(r, "fewer than one window");
}

}  // namespace
}  // namespace hearth
