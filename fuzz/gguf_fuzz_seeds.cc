// Writes the fuzzer's seed corpus into the directory given as argument: small valid GGUF files
// covering every value type, several tensor types, a non-default alignment, the PowerInfer magic
// and version 2, so that mutations start from inputs that reach deep into the parser.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"

namespace {

using hearth::gguf::GgufWriter;
using hearth::gguf::Value;
using hearth::gguf::ValueType;

void add_all_value_types(GgufWriter& w) {
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_i32("i32", -5);
  w.set_u64("u64", 1ull << 40);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_bool("flag", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  const std::vector<float> scores = {0.0f, -1.0f, -2.0f, -3.5f};
  w.set_f32_array("tokenizer.ggml.scores", scores);
  const std::vector<int32_t> types = {2, 3, 3, 1};
  w.set_i32_array("tokenizer.ggml.token_type", types);
  Value v;
  v.type = ValueType::I8;
  v.i = -1;
  w.copy_value("i8", v);
  v.type = ValueType::U16;
  v.u = 300;
  w.copy_value("u16", v);
  v.type = ValueType::F64;
  v.f = 0.125;
  w.copy_value("f64", v);
}

void write_seed(const GgufWriter& w, const std::string& path, bool version2) {
  w.write(path);
  if (!version2) return;
  // The writer emits v3; v2 has the same layout, so patching the version byte yields a v2 seed.
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(4);
  f.put(2);
  if (!f) hearth::fail("cannot patch ", path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds <output directory>\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    std::vector<uint8_t> bytes(4096);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + 7);

    GgufWriter empty;
    write_seed(empty, dir + "/empty.gguf", false);

    GgufWriter values;
    add_all_value_types(values);
    write_seed(values, dir + "/values.gguf", false);

    GgufWriter tensors;
    add_all_value_types(tensors);
    tensors.add_tensor("token_embd.weight", 0, std::vector<int64_t>{8, 4}, bytes.data(), 128);
    tensors.add_tensor("blk.0.attn_q.weight", 1, std::vector<int64_t>{8, 8}, bytes.data(), 128);
    tensors.add_tensor("blk.0.ffn_up.weight", 8, std::vector<int64_t>{32, 2}, bytes.data(), 68);
    tensors.add_tensor("blk.0.ffn_down.weight", 2, std::vector<int64_t>{32, 1, 2}, bytes.data(),
                       36);
    tensors.add_tensor("output_norm.weight", 30, std::vector<int64_t>{8}, bytes.data(), 16);
    write_seed(tensors, dir + "/tensors.gguf", false);
    write_seed(tensors, dir + "/tensors_v2.gguf", true);

    GgufWriter powerinfer;
    powerinfer.set_magic_powerinfer(true);
    powerinfer.set_alignment(64);
    powerinfer.set_string("general.architecture", "llama");
    powerinfer.add_tensor("blk.0.fc1.weight", 0, std::vector<int64_t>{4, 2, 1, 2}, bytes.data(),
                          64);
    powerinfer.add_tensor("blk.0.fc2.weight", 12, std::vector<int64_t>{256}, bytes.data(), 144);
    write_seed(powerinfer, dir + "/powerinfer.gguf", false);
  } catch (const hearth::Error& e) {
    std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
