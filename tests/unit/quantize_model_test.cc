// hearth quantize (src/model/quantize_model.h) on small models made here: a dense Llama whose n_ff
// is not a multiple of 32 (its ffn_down cannot be block-quantized), and a sparse ReLU model with
// ffn_down_t and predictors, rewritten as a PowerInfer file with activation statistics.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/quantize_model.h"
#include "model/synth.h"

namespace fs = std::filesystem;

namespace hearth {
namespace {

constexpr int64_t kOddFf = 80;  // a multiple of 16, not of 32

std::string make_dense(const std::string& dir) {
  SynthOptions o;
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_ff = kOddFf;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_vocab = 300;
  o.n_ctx = 64;
  o.type = DType::F32;
  const std::string path = dir + "/dense-f32.gguf";
  write_synthetic_model(o, path);
  return path;
}

// A sparse synthetic model as `hearth calibrate` would leave a PowerInfer file: magic PWRI and a
// blk.N.ffn_act_freq vector per layer (all tensors f32, predictors included).
std::string make_pwri(const std::string& dir) {
  SynthOptions o;
  o.n_embd = 128;
  o.n_layer = 2;
  o.n_ff = 256;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_vocab = 300;
  o.n_ctx = 64;
  o.type = DType::F32;
  o.act = FfnActivation::Relu;
  o.sparsity = 0.8;
  const std::string plain = dir + "/sparse-f32.gguf";
  write_synthetic_model(o, plain);
  const auto in = gguf::GgufFile::open(plain);
  gguf::GgufWriter w;
  w.set_magic_powerinfer(true);
  for (const auto& [key, value] : in->metadata()) w.copy_value(key, value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims), t.data, t.nbytes);
  }
  std::vector<float> freq(static_cast<size_t>(o.n_ff));
  for (size_t i = 0; i < freq.size(); ++i) freq[i] = 1.0f / static_cast<float>(i + 1);
  const int64_t ne[1] = {o.n_ff};
  for (int64_t il = 0; il < o.n_layer; ++il) {
    w.add_tensor("blk." + std::to_string(il) + ".ffn_act_freq", 0, ne, freq.data(),
                 freq.size() * sizeof(float));
  }
  const std::string path = dir + "/pwri-f32.gguf";
  w.write(path);
  return path;
}

std::vector<float> last_logits(const std::shared_ptr<const Model>& m, SparseMode mode) {
  SessionOptions o;
  o.sparse = mode;
  o.n_threads = 2;
  Session s(m, o);
  const std::vector<int32_t> prompt = {1, 40, 71, 99, 120, 33, 250, 7};
  const auto l = s.eval(prompt);
  return {l.begin(), l.end()};
}

// Largest logit difference relative to the source's logit range.
double relative_logit_error(const std::vector<float>& ref, const std::vector<float>& got) {
  float lo = ref[0], hi = ref[0], d = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    lo = std::min(lo, ref[i]);
    hi = std::max(hi, ref[i]);
    d = std::max(d, std::fabs(ref[i] - got[i]));
  }
  return d / (hi - lo);
}

DType type_of(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? static_cast<DType>(t->type) : DType::F32;
}

// Every input key is in the output with the same value, bar the two quantize sets.
void expect_metadata_kept(const gguf::GgufFile& in, const gguf::GgufFile& out) {
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version") continue;
    const gguf::Value* v = out.find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(gguf::GgufFile::format_value(*v, 1u << 20), gguf::GgufFile::format_value(value, 1u << 20))
        << key;
  }
}

const DType kTargets[] = {DType::F16, DType::Q8_0, DType::Q4_0};

TEST(QuantizeModel, TensorTypesMetadataAndSizes) {
  const std::string dir = test::temp_dir();
  const std::string src = make_dense(dir);
  const auto in = gguf::GgufFile::open(src);
  for (const DType type : kTargets) {
    const std::string name(dtype_name(type));
    const std::string dst = dir + "/dense-" + name + ".gguf";
    const QuantizeReport r = quantize_model(src, dst, type);
    const auto out = gguf::GgufFile::open(dst);
    EXPECT_FALSE(out->is_powerinfer());
    expect_metadata_kept(*in, *out);
    EXPECT_EQ(out->get_int("general.file_type"), llama_file_type(type)) << name;
    const bool block = type != DType::F16;
    EXPECT_EQ(out->get_int("general.quantization_version"),
              block ? std::optional<int64_t>(2) : std::nullopt) << name;

    ASSERT_EQ(out->tensors().size(), in->tensors().size());
    for (const gguf::TensorInfo& t : out->tensors()) {
      const bool odd = t.name.find("ffn_down") != std::string::npos;
      const DType want = t.n_dims == 1 ? DType::F32 : odd ? DType::F16 : type;
      EXPECT_EQ(static_cast<DType>(t.type), want) << name << " " << t.name;
    }
    EXPECT_EQ(r.fallbacks.size(), block ? 2u : 0u) << name;  // ffn_down of each layer
    for (const QuantizeFallback& f : r.fallbacks) {
      EXPECT_EQ(f.row_length, kOddFf);
      EXPECT_EQ(f.kept, DType::F16);
    }
    EXPECT_EQ(r.input_bytes, fs::file_size(src));
    EXPECT_EQ(r.output_bytes, fs::file_size(dst));
    EXPECT_GT(r.ratio(), 1.5) << name;
    EXPECT_EQ(r.input_types.at(0), static_cast<int64_t>(in->tensors().size()));
    int64_t converted = 0;
    for (const auto& [t, n] : r.output_types) converted += t == 0 ? 0 : n;
    EXPECT_EQ(r.converted, converted);
  }
}

TEST(QuantizeModel, OutputLoadsAndStaysCloseToTheSource) {
  const std::string dir = test::temp_dir();
  const std::string src = make_dense(dir);
  const auto ref_model = Model::load(src);
  const auto ref = last_logits(ref_model, SparseMode::Dense);
  SessionOptions greedy;
  greedy.n_threads = 2;
  const auto ref_ids = test::greedy_ids(ref_model, 6, greedy);
  for (const DType type : kTargets) {
    const std::string dst = dir + "/out-" + std::string(dtype_name(type)) + ".gguf";
    quantize_model(src, dst, type);
    const auto m = Model::load(dst);
    const double err = relative_logit_error(ref, last_logits(m, SparseMode::Dense));
    EXPECT_LT(err, type == DType::F16 ? 0.01 : type == DType::Q8_0 ? 0.03 : 0.15)
        << dtype_name(type);
    if (type != DType::Q4_0) {
      EXPECT_EQ(test::greedy_ids(m, 6, greedy), ref_ids) << dtype_name(type);
    }
  }
}

TEST(QuantizeModel, PowerInferFileKeepsMagicPredictorsAndStatistics) {
  const std::string dir = test::temp_dir();
  const std::string src = make_pwri(dir);
  const auto in = gguf::GgufFile::open(src);
  const auto ref = last_logits(Model::load(src), SparseMode::Predictor);
  for (const bool predictors : {false, true}) {
    const std::string dst = dir + "/pwri-q4_0-" + std::to_string(predictors) + ".gguf";
    QuantizeOptions o;
    o.quantize_predictors = predictors;
    EXPECT_TRUE(quantize_model(src, dst, DType::Q4_0, o).powerinfer);
    const auto out = gguf::GgufFile::open(dst);
    EXPECT_TRUE(out->is_powerinfer());
    expect_metadata_kept(*in, *out);
    for (const char* t : {"ffn_up", "ffn_gate", "ffn_down", "ffn_down_t", "attn_q"}) {
      EXPECT_EQ(type_of(*out, std::string("blk.1.") + t + ".weight"), DType::Q4_0) << t;
    }
    // fc1 rows are n_embd long; fc2 rows are the predictor width, which may not hold whole blocks.
    const gguf::TensorInfo* fc2 = out->find_tensor("blk.0.fc2.weight");
    ASSERT_NE(fc2, nullptr);
    const DType fc2_quantized = fc2->ne[0] % 32 == 0 ? DType::Q4_0 : DType::F16;
    EXPECT_EQ(type_of(*out, "blk.0.fc1.weight"), predictors ? DType::Q4_0 : DType::F32);
    EXPECT_EQ(type_of(*out, "blk.0.fc2.weight"), predictors ? fc2_quantized : DType::F32);
    for (const std::string stat : {"blk.0.ffn_act_freq", "blk.1.ffn_act_freq"}) {
      const gguf::TensorInfo* a = in->find_tensor(stat);
      const gguf::TensorInfo* b = out->find_tensor(stat);
      ASSERT_NE(b, nullptr) << stat;
      EXPECT_EQ(b->type, 0u);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(a->data), a->nbytes),
                std::string(reinterpret_cast<const char*>(b->data), b->nbytes));
    }
    const auto m = Model::load(dst);
    EXPECT_TRUE(m->is_powerinfer());
    EXPECT_TRUE(m->has_predictors());
    EXPECT_LT(relative_logit_error(ref, last_logits(m, SparseMode::Predictor)), 0.2);
  }
}

TEST(QuantizeModel, SameTypeAgainIsByteIdentical) {
  const std::string dir = test::temp_dir();
  const std::string src = make_pwri(dir);
  for (const DType type : kTargets) {
    const std::string name(dtype_name(type));
    const std::string once = dir + "/once-" + name + ".gguf", twice = dir + "/twice-" + name + ".gguf";
    quantize_model(src, once, type);
    const QuantizeReport r = quantize_model(once, twice, type);
    EXPECT_EQ(r.converted, 0) << name;
    EXPECT_EQ(test::read_file(once), test::read_file(twice)) << name;
  }
  // Another block type goes through floats; the report says the error compounds.
  const QuantizeReport r = quantize_model(dir + "/once-q8_0.gguf", dir + "/q4-from-q8.gguf", DType::Q4_0);
  EXPECT_GT(r.requantized, 0);
  EXPECT_EQ(r.requantized, r.converted);
  EXPECT_NO_THROW(Model::load(dir + "/q4-from-q8.gguf"));
}

TEST(QuantizeModel, OutputTensorTypeOverridesTheOutputOnly) {
  const std::string dir = test::temp_dir();
  const std::string dst = dir + "/q4-out-q8.gguf";
  QuantizeOptions o;
  o.output_type = DType::Q8_0;
  quantize_model(make_dense(dir), dst, DType::Q4_0, o);
  const auto out = gguf::GgufFile::open(dst);
  EXPECT_EQ(type_of(*out, "output.weight"), DType::Q8_0);
  EXPECT_EQ(type_of(*out, "token_embd.weight"), DType::Q4_0);
  EXPECT_EQ(type_of(*out, "blk.0.attn_q.weight"), DType::Q4_0);
  EXPECT_EQ(out->get_int("general.file_type"), llama_file_type(DType::Q4_0));
  EXPECT_NO_THROW(Model::load(dst));
}

TEST(QuantizeModel, DefaultMixAndTensorTypeRules) {
  const std::string dir = test::temp_dir();
  const std::string src = make_dense(dir);
  QuantizeOptions o;
  o.tensor_types.emplace_back("blk\\.1\\.ffn_up", DType::Q8_0);  // the user's rule comes first
  apply_default_mix(DType::Q4_0, /*grouped_query=*/true, o);
  const QuantizeReport r = quantize_model(src, dir + "/mix.gguf", DType::Q4_0, o);
  const auto out = gguf::GgufFile::open(dir + "/mix.gguf");
  EXPECT_EQ(type_of(*out, "output.weight"), DType::Q8_0);
  for (const char* name : {"blk.0.attn_v.weight", "blk.1.attn_v.weight", "blk.0.attn_k.weight",
                           "blk.1.attn_k.weight", "blk.1.ffn_up.weight"}) {
    EXPECT_EQ(type_of(*out, name), DType::Q8_0) << name;
  }
  EXPECT_EQ(type_of(*out, "blk.0.ffn_up.weight"), DType::Q4_0);
  EXPECT_EQ(type_of(*out, "blk.0.attn_q.weight"), DType::Q4_0);
  EXPECT_EQ(type_of(*out, "token_embd.weight"), DType::Q4_0);  // not a copy of the output here
  EXPECT_FALSE(r.tied_copy);
  // output, two attn_v, two attn_k, one ffn_up; each costs its rows * (34 - 18) bytes per block
  // of 32.
  ASSERT_EQ(r.promotions.size(), 6u);
  for (const QuantizePromotion& p : r.promotions) {
    const gguf::TensorInfo* t = out->find_tensor(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    EXPECT_EQ(p.extra_bytes, t->ne[1] * (t->ne[0] / 32) * 16) << p.name;
  }
  // Without grouped-query attention attn_k is as large as attn_q and stays at the target type.
  QuantizeOptions mha;
  apply_default_mix(DType::Q4_0, /*grouped_query=*/false, mha);
  quantize_model(src, dir + "/mha.gguf", DType::Q4_0, mha);
  const auto out_mha = gguf::GgufFile::open(dir + "/mha.gguf");
  EXPECT_EQ(type_of(*out_mha, "blk.0.attn_k.weight"), DType::Q4_0);
  EXPECT_EQ(type_of(*out_mha, "blk.0.attn_v.weight"), DType::Q8_0);
  // Other targets have no mix; a bad pattern is a clean error.
  QuantizeOptions q8;
  apply_default_mix(DType::Q8_0, true, q8);
  EXPECT_TRUE(q8.tensor_types.empty());
  EXPECT_FALSE(q8.output_type.has_value());
  QuantizeOptions bad;
  bad.tensor_types.emplace_back("attn_v(", DType::Q8_0);
  EXPECT_THROW(quantize_model(src, dir + "/bad.gguf", DType::Q4_0, bad), Error);
}

// Tied embeddings stored twice: token_embd follows the output's type, as llama.cpp's tied one.
TEST(QuantizeModel, TiedCopyOfTheOutputTakesTheOutputType) {
  const std::string dir = test::temp_dir();
  const auto in = gguf::GgufFile::open(make_dense(dir));
  const gguf::TensorInfo* emb = in->find_tensor("token_embd.weight");
  gguf::GgufWriter w;
  for (const auto& [key, value] : in->metadata()) w.copy_value(key, value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    const uint8_t* data = t.name == "output.weight" ? emb->data : t.data;
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims), data, t.nbytes);
  }
  const std::string src = dir + "/tied.gguf";
  w.write(src);
  QuantizeOptions o;
  apply_default_mix(DType::Q4_0, true, o);
  const QuantizeReport r = quantize_model(src, dir + "/tied-q4_0.gguf", DType::Q4_0, o);
  EXPECT_TRUE(r.tied_copy);
  const auto out = gguf::GgufFile::open(dir + "/tied-q4_0.gguf");
  EXPECT_EQ(type_of(*out, "token_embd.weight"), DType::Q8_0);
  EXPECT_EQ(type_of(*out, "output.weight"), DType::Q8_0);
}

TEST(QuantizeModel, LazyWriterFailureLeavesNoFile) {
  const std::string dir = test::temp_dir();
  gguf::GgufWriter w;
  const int64_t ne[1] = {8};
  w.add_tensor_lazy("x", 0, ne, 32, [](uint8_t*) { throw std::runtime_error("interrupted"); });
  EXPECT_THROW(w.write(dir + "/out.gguf"), std::runtime_error);
  EXPECT_TRUE(fs::is_empty(dir));
}

// Files in `dir` other than those listed: a failed run must leave neither OUT nor its temp file.
std::vector<std::string> extra_files(const std::string& dir, const std::vector<std::string>& known) {
  std::vector<std::string> extra;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::find(known.begin(), known.end(), name) == known.end()) extra.push_back(name);
  }
  return extra;
}

TEST(QuantizeCli, ReportsSizesTypesAndFallbacks) {
  const std::string dir = test::temp_dir();
  const std::string src = make_dense(dir);
  const auto r = test::run_hearth({"quantize", src, dir + "/q8.gguf", "Q8_0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* needle : {"as q8_0", "blk.0.ffn_down.weight: row length 80 is not a multiple of 32, kept as f16",
                             "input:  ", "(f32 ", "output: ", "q8_0 ", "compression "}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  EXPECT_NO_THROW(Model::load(dir + "/q8.gguf"));
}

TEST(QuantizeCli, CleanErrorsLeaveNoOutput) {
  const std::string dir = test::temp_dir();
  const std::string src = make_dense(dir);
  const std::string out = dir + "/out.gguf";
  test::expect_clean_error(test::run_hearth({"quantize", src, out, "q5_k"}), "unknown type 'q5_k'");
  test::expect_clean_error(test::run_hearth({"quantize", dir + "/none.gguf", out, "q4_0"}), "none.gguf");
  test::expect_clean_error(test::run_hearth({"quantize", src, out}), "type");
  // The same file under another spelling of its path.
  test::expect_clean_error(test::run_hearth({"quantize", src, dir + "/./dense-f32.gguf", "q8_0"}),
                           "is the input file");
  test::expect_clean_error(test::run_hearth({"quantize", src, dir + "/no/such/dir/out.gguf", "q8_0"}),
                           "does not exist");
  test::expect_clean_error(test::run_hearth({"quantize", src, src + "/out.gguf", "q8_0"}),
                           "is not a directory");
  test::expect_clean_error(test::run_hearth({"quantize", src, dir, "q8_0"}), "is a directory");
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string ro = dir + "/ro";
    fs::create_directory(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    test::expect_clean_error(test::run_hearth({"quantize", src, ro + "/out.gguf", "q8_0"}),
                             "not writable");
    fs::permissions(ro, fs::perms::owner_all);
    fs::remove(ro);
  }
  // Not GGUF, and GGUF that the model loader rejects.
  test::write_file(dir + "/junk.gguf", "GGUF this is not a model");
  test::expect_clean_error(test::run_hearth({"quantize", dir + "/junk.gguf", out, "q8_0"}), "junk.gguf");
  gguf::GgufWriter w;
  w.set_string("general.architecture", "gpt9");
  const float x[4] = {};
  const int64_t ne[1] = {4};
  w.add_tensor("token_embd.weight", 0, ne, x, sizeof x);
  w.write(dir + "/gpt9.gguf");
  test::expect_clean_error(test::run_hearth({"quantize", dir + "/gpt9.gguf", out, "q8_0"}),
                           "unsupported architecture 'gpt9'");
  EXPECT_EQ(extra_files(dir, {"dense-f32.gguf", "junk.gguf", "gpt9.gguf"}), std::vector<std::string>{});
}

}  // namespace
}  // namespace hearth
