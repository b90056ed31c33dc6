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

#include "calib/imatrix.h"
#include "common/test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "hearth/model.h"
#include "hearth/session.h"
#include "model/imatrix_file.h"
#include "model/quantize_model.h"
#include "model/synth.h"

namespace fs = std::filesystem;

namespace hearth {
namespace {

constexpr int64_t kOddFf = 80;  // a multiple of 16, not of 32

// An f32 dense Llama of the given shape (300 tokens, context 64) at dir/name.
std::string write_dense(const std::string& dir, const std::string& name, int64_t n_embd,
                        int64_t n_layer, int64_t n_ff, int64_t n_head, int64_t n_head_kv) {
  SynthOptions o;
  o.n_embd = n_embd;
  o.n_layer = n_layer;
  o.n_ff = n_ff;
  o.n_head = n_head;
  o.n_head_kv = n_head_kv;
  o.n_vocab = 300;
  o.n_ctx = 64;
  o.type = DType::F32;
  const std::string path = dir + "/" + name;
  write_synthetic_model(o, path);
  return path;
}

// The q4_0 mix's one input about the model: whether it has grouped-query attention.
void apply_q4_0_style_mix(DType type, bool grouped_query, QuantizeOptions& o) {
  MixShape shape;
  shape.n_head = grouped_query ? 2 : 1;
  apply_default_mix(QuantizeTarget(type), shape, o);
}

std::string make_dense(const std::string& dir) {
  return write_dense(dir, "dense-f32.gguf", 64, 2, kOddFf, 4, 2);
}

// A sparse synthetic model as `hearth calibrate` would leave a PowerInfer file: magic PWRI and a
// blk.N.ffn_act_freq vector per layer (all tensors f32, predictors included).
std::string make_pwri(const std::string& dir, int64_t n_embd = 128) {
  SynthOptions o;
  o.n_embd = n_embd;
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
  apply_q4_0_style_mix(DType::Q4_0, /*grouped_query=*/true, o);
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
  apply_q4_0_style_mix(DType::Q4_0, /*grouped_query=*/false, mha);
  quantize_model(src, dir + "/mha.gguf", DType::Q4_0, mha);
  const auto out_mha = gguf::GgufFile::open(dir + "/mha.gguf");
  EXPECT_EQ(type_of(*out_mha, "blk.0.attn_k.weight"), DType::Q4_0);
  EXPECT_EQ(type_of(*out_mha, "blk.0.attn_v.weight"), DType::Q8_0);
  // Other targets have no mix; a bad pattern is a clean error.
  QuantizeOptions q8;
  apply_q4_0_style_mix(DType::Q8_0, true, q8);
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
  apply_q4_0_style_mix(DType::Q4_0, true, o);
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
  test::expect_clean_error(test::run_hearth({"quantize", src, out, "q7_k"}), "unknown type 'q7_k'");
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

// --- The K-quant, legacy and IQ4 targets.

// 8 layers of 256-wide rows (K-quant super-blocks fit), n_ff = 320: a multiple of 32, not of
// 256, so every ffn_down falls back to a 32-weight type; 8 query heads on 2 KV heads.
std::string make_wide(const std::string& dir) {
  return write_dense(dir, "wide-f32.gguf", 256, 8, 320, 8, 2);
}

TEST(QuantizeTargets, NamesAndLlamaFileTypes) {
  const std::pair<const char*, uint32_t> names[] = {
      {"f32", 0},     {"f16", 1},     {"q4_0", 2},    {"q4_1", 3},    {"q8_0", 7},
      {"q5_0", 8},    {"q5_1", 9},    {"q2_k", 10},   {"q3_k_s", 11}, {"q3_k", 11},
      {"q3_k_m", 12}, {"q4_k_s", 14}, {"q4_k", 14},   {"q4_k_m", 15}, {"q5_k_s", 16},
      {"q5_k", 16},   {"q5_k_m", 17}, {"q6_k", 18},   {"iq4_nl", 25}, {"iq4_xs", 30},
      {"bf16", 32}};
  for (const auto& [name, file_type] : names) {
    const auto t = parse_quantize_target(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(llama_file_type(*t), file_type) << name;
    // The canonical name parses back to the same target (q4_k prints as q4_k_s).
    EXPECT_EQ(parse_quantize_target(quantize_target_name(*t)), t) << name;
  }
  EXPECT_EQ(parse_quantize_target("Q4_K_M"), QuantizeTarget(DType::Q4_K, QuantizeMix::kMedium));
  EXPECT_EQ(parse_quantize_target("q4_k"), QuantizeTarget(DType::Q4_K, QuantizeMix::kSmall));
  for (const char* bad : {"q7_k", "q4_0_m", "q6_k_m", "", "q8_k"}) {
    EXPECT_FALSE(parse_quantize_target(bad).has_value()) << bad;
  }
  // A mix the type does not have names no file type.
  EXPECT_THROW(llama_file_type(QuantizeTarget(DType::Q8_0, QuantizeMix::kMedium)), Error);
}

TEST(QuantizeTargets, UseMoreBitsIsLlamaCppsRule) {
  // n = 8: the first eighth (0), the last (7), and i - 1 = 2 mod 3 between (3, 6).
  std::vector<int64_t> more;
  for (int64_t il = 0; il < 8; ++il) {
    if (use_more_bits(il, 8)) more.push_back(il);
  }
  EXPECT_EQ(more, (std::vector<int64_t>{0, 3, 6, 7}));
  more.clear();
  for (int64_t il = 0; il < 32; ++il) {
    if (use_more_bits(il, 32)) more.push_back(il);
  }
  EXPECT_EQ(more, (std::vector<int64_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
}

// The type of every matrix of the wide model under a target's default mix.
struct MixCase {
  const char* target;
  DType output, attn_v_more, attn_v_other, down_more, down_other, attn_q;
};

TEST(QuantizeModel, KQuantMixesFileTypesAndFallbacks) {
  const std::string dir = test::temp_dir();
  const std::string src = make_wide(dir);
  const auto shape = mix_shape(*gguf::GgufFile::open(src));
  EXPECT_EQ(shape.n_layer, 8);
  EXPECT_EQ(shape.n_gqa(), 4);
  // "more": layers 0, 3, 6, 7 (use_more_bits), "other": layer 1. ffn_down rows are 320 long:
  // q6_k -> q8_0, q4_k -> q5_0, q5_k -> q5_1, iq4_xs / q3_k / q2_k -> iq4_nl.
  const MixCase cases[] = {
      {"q4_k_m", DType::Q6_K, DType::Q6_K, DType::Q4_K, DType::Q8_0, DType::Q5_0, DType::Q4_K},
      {"q5_k_m", DType::Q6_K, DType::Q6_K, DType::Q5_K, DType::Q8_0, DType::Q5_1, DType::Q5_K},
      // q4_k_s: attn_v of layers 0-3 and ffn_down of layer 0 (< 8 / 8) at q5_k.
      {"q4_k", DType::Q6_K, DType::Q5_K, DType::Q5_K, DType::Q5_1, DType::Q5_0, DType::Q4_K},
      {"q5_k", DType::Q6_K, DType::Q5_K, DType::Q5_K, DType::Q5_1, DType::Q5_1, DType::Q5_K},
      {"q6_k", DType::Q6_K, DType::Q6_K, DType::Q6_K, DType::Q8_0, DType::Q8_0, DType::Q6_K},
      {"q4_1", DType::Q6_K, DType::Q4_1, DType::Q4_1, DType::Q4_1, DType::Q4_1, DType::Q4_1},
      {"q5_0", DType::Q6_K, DType::Q5_0, DType::Q5_0, DType::Q5_0, DType::Q5_0, DType::Q5_0},
      {"q5_1", DType::Q6_K, DType::Q5_1, DType::Q5_1, DType::Q5_1, DType::Q5_1, DType::Q5_1},
      // n_head / n_head_kv = 4: attn_v at q5_k.
      {"iq4_nl", DType::Q6_K, DType::Q5_K, DType::Q5_K, DType::IQ4_NL, DType::IQ4_NL, DType::IQ4_NL},
      {"iq4_xs", DType::Q6_K, DType::Q5_K, DType::Q5_K, DType::IQ4_NL, DType::IQ4_NL, DType::IQ4_XS},
      // q3_k_m: attn_v q5_k in layers 0-1 (so blk.1), q4_k after (blk.3); ffn_down q4_k
      // (8 / 16 = 0 layers at q5_k), which falls back to q5_0.
      {"q3_k_m", DType::Q6_K, DType::Q4_K, DType::Q5_K, DType::Q5_0, DType::Q5_0, DType::Q3_K},
      {"q2_k", DType::Q6_K, DType::Q4_K, DType::Q4_K, DType::IQ4_NL, DType::IQ4_NL, DType::Q2_K},
  };
  const auto ref = last_logits(Model::load(src), SparseMode::Dense);
  for (const MixCase& c : cases) {
    const QuantizeTarget target = *parse_quantize_target(c.target);
    QuantizeOptions o;
    apply_default_mix(target, shape, o);
    const std::string dst = dir + "/wide-" + c.target + ".gguf";
    const QuantizeReport r = quantize_model(src, dst, target, o);
    const auto out = gguf::GgufFile::open(dst);
    EXPECT_EQ(out->get_int("general.file_type"), llama_file_type(target)) << c.target;
    EXPECT_EQ(out->get_int("general.quantization_version"), 2) << c.target;
    EXPECT_EQ(type_of(*out, "output.weight"), c.output) << c.target;
    EXPECT_EQ(type_of(*out, "token_embd.weight"), target.type) << c.target;
    EXPECT_EQ(type_of(*out, "blk.3.attn_v.weight"), c.attn_v_more) << c.target;
    EXPECT_EQ(type_of(*out, "blk.1.attn_v.weight"), c.attn_v_other) << c.target;
    EXPECT_EQ(type_of(*out, "blk.0.ffn_down.weight"), c.down_more) << c.target;
    EXPECT_EQ(type_of(*out, "blk.1.ffn_down.weight"), c.down_other) << c.target;
    EXPECT_EQ(type_of(*out, "blk.5.attn_q.weight"), c.attn_q) << c.target;
    EXPECT_EQ(type_of(*out, "blk.5.attn_norm.weight"), DType::F32) << c.target;
    // Every ffn_down is reported as a fallback from the type it wanted.
    int64_t down_fallbacks = 0;
    for (const QuantizeFallback& f : r.fallbacks) {
      EXPECT_EQ(f.row_length, 320) << c.target << " " << f.name;
      down_fallbacks += f.name.find("ffn_down") != std::string::npos;
    }
    const bool wide_type = dtype_block_size(c.down_more) < 256 && dtype_block_size(target.type) == 256;
    EXPECT_EQ(down_fallbacks, wide_type ? 8 : 0) << c.target;
    // Loads, runs, and stays close to the source.
    const auto m = Model::load(dst);
    const double err = relative_logit_error(ref, last_logits(m, SparseMode::Dense));
    const double bound = target.type == DType::Q2_K ? 0.3 : target.type == DType::Q3_K ? 0.2 : 0.1;
    EXPECT_LT(err, bound) << c.target;
  }
  // --pure: no mix; the target's type everywhere it fits, file type still the mix's.
  const std::string pure = dir + "/wide-q4_k_m-pure.gguf";
  quantize_model(src, pure, *parse_quantize_target("q4_k_m"));
  const auto out = gguf::GgufFile::open(pure);
  EXPECT_EQ(type_of(*out, "output.weight"), DType::Q4_K);
  EXPECT_EQ(type_of(*out, "blk.3.attn_v.weight"), DType::Q4_K);
  EXPECT_EQ(out->get_int("general.file_type"), 15);
}

TEST(QuantizeModel, KQuantPowerInferFileKeepsMagicPredictorsAndStatistics) {
  const std::string dir = test::temp_dir();
  const std::string src = make_pwri(dir, 256);
  const auto in = gguf::GgufFile::open(src);
  const QuantizeTarget target = *parse_quantize_target("q4_k_m");
  QuantizeOptions o;
  apply_default_mix(target, mix_shape(*in), o);
  const std::string dst = dir + "/pwri-q4_k_m.gguf";
  EXPECT_TRUE(quantize_model(src, dst, target, o).powerinfer);
  const auto out = gguf::GgufFile::open(dst);
  EXPECT_TRUE(out->is_powerinfer());
  expect_metadata_kept(*in, *out);
  EXPECT_EQ(out->get_int("general.file_type"), 15);
  // Predictors and statistics untouched (the predictors are f32 here, as in the source).
  for (const std::string name : {"blk.0.fc1.weight", "blk.0.fc2.weight", "blk.1.fc1.weight",
                                 "blk.0.ffn_act_freq", "blk.1.ffn_act_freq"}) {
    const gguf::TensorInfo* a = in->find_tensor(name);
    const gguf::TensorInfo* b = out->find_tensor(name);
    ASSERT_NE(a, nullptr) << name;
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(a->type, b->type) << name;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(a->data), a->nbytes),
              std::string(reinterpret_cast<const char*>(b->data), b->nbytes)) << name;
  }
  // 2 layers: use_more_bits(i, 2) holds for layer 1 (the last eighth) only; ffn_down_t follows.
  EXPECT_EQ(type_of(*out, "blk.0.attn_q.weight"), DType::Q4_K);
  EXPECT_EQ(type_of(*out, "blk.0.ffn_up.weight"), DType::Q4_K);
  EXPECT_EQ(type_of(*out, "blk.1.attn_v.weight"), DType::Q6_K);
  EXPECT_EQ(type_of(*out, "blk.1.ffn_down.weight"), DType::Q6_K);
  EXPECT_EQ(type_of(*out, "blk.1.ffn_down_t.weight"), DType::Q6_K);
  EXPECT_EQ(type_of(*out, "blk.0.ffn_down_t.weight"), DType::Q4_K);
  const auto m = Model::load(dst);
  EXPECT_TRUE(m->is_powerinfer());
  EXPECT_TRUE(m->has_predictors());
}

TEST(QuantizeModel, ImatrixWeighsTheKAndIq4Types) {
  const std::string dir = test::temp_dir();
  const std::string src = make_wide(dir);
  calib::ImatrixOptions io;
  for (int i = 0; i < 200; ++i) io.text += "the cat sat on a mat and ran " + std::to_string(i % 13) + ". ";
  io.dataset_name = "cats.txt";
  io.window = 32;
  io.max_tokens = 128;
  io.n_threads = 2;
  Imatrix im = calib::collect_imatrix(Model::load(src), io);
  const std::string path = dir + "/wide.imatrix.gguf";
  write_imatrix(im, path);
  for (const char* name : {"q4_k_m", "iq4_xs", "q5_0"}) {
    const QuantizeTarget target = *parse_quantize_target(name);
    QuantizeOptions o;
    o.imatrix = path;
    apply_default_mix(target, mix_shape(*gguf::GgufFile::open(src)), o);
    const std::string dst = dir + "/wide-" + name + "-i.gguf";
    const QuantizeReport r = quantize_model(src, dst, target, o);
    // Every projection of the 8 layers and the output are weighted (GPTQ is q4_0's alone)
    // but those stored as q8_0, which takes no weights (q4_k_m: the four ffn_down of the
    // use_more_bits layers, q6_k falling back to q8_0); token_embd is looked up, so it has no
    // entry.
    EXPECT_EQ(r.imatrix_gptq, 0) << name;
    const int64_t q8 = r.output_types.count(static_cast<uint32_t>(DType::Q8_0))
                           ? r.output_types.at(static_cast<uint32_t>(DType::Q8_0)) : 0;
    EXPECT_EQ(q8, std::string(name) == "q4_k_m" ? 4 : 0) << name;
    EXPECT_EQ(r.imatrix_weighted, 8 * 7 + 1 - q8) << name;
    EXPECT_EQ(r.imatrix_unweighted, 1) << name;
    // The weights change the bytes of a weighted matrix, not of token_embd.
    quantize_model(src, dir + "/plain.gguf", target, [&] {
      QuantizeOptions p;
      apply_default_mix(target, mix_shape(*gguf::GgufFile::open(src)), p);
      return p;
    }());
    const auto a = gguf::GgufFile::open(dst);
    const auto b = gguf::GgufFile::open(dir + "/plain.gguf");
    const auto bytes = [](const gguf::GgufFile& f, const char* t) {
      const gguf::TensorInfo* i = f.find_tensor(t);
      return std::string(reinterpret_cast<const char*>(i->data), i->nbytes);
    };
    EXPECT_NE(bytes(*a, "blk.2.attn_q.weight"), bytes(*b, "blk.2.attn_q.weight")) << name;
    EXPECT_EQ(bytes(*a, "token_embd.weight"), bytes(*b, "token_embd.weight")) << name;
    EXPECT_NO_THROW(Model::load(dst)) << name;
  }
}

TEST(QuantizeCli, KQuantMixReportsItsName) {
  const std::string dir = test::temp_dir();
  const std::string src = make_wide(dir);
  const auto r = test::run_hearth({"quantize", src, dir + "/q4km.gguf", "Q4_K_M"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"as q4_k_m", "blk.0.ffn_down.weight: row length 320 is not a multiple of 256, kept as q8_0",
                             "blk.1.ffn_down.weight: row length 320 is not a multiple of 256, kept as q5_0",
                             "type mix: output.weight", "as q6_k instead of q4_k"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  }
  const auto out = gguf::GgufFile::open(dir + "/q4km.gguf");
  EXPECT_EQ(out->get_int("general.file_type"), 15);
  // A mix name is not a tensor type.
  test::expect_clean_error(
      test::run_hearth({"quantize", src, dir + "/x.gguf", "q4_k", "--output-tensor-type", "q4_k_m"}),
      "unknown type 'q4_k_m'");
}

}  // namespace
}  // namespace hearth
