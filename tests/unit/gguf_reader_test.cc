// GgufFile on a real llama.cpp-written model, and the value conversions and rendering the rest of
// Hearth relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"

namespace hearth::gguf {
namespace {

TEST(GgufReader, ReadsStories260K) {
  HEARTH_REQUIRE_SHARED(shared);
  const auto f = GgufFile::open(shared + "/models/stories260K.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_FALSE(f->is_powerinfer());
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(*f->get_int("llama.block_count"), 5);
  EXPECT_EQ(*f->get_int("llama.context_length"), 512);
  EXPECT_EQ(*f->get_int("llama.feed_forward_length"), 172);
  EXPECT_NEAR(*f->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);

  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores")->size(), 512u);

  const TensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, 0u);  // f32
  EXPECT_EQ(embd->n_dims, 2);
  EXPECT_EQ(embd->ne[0], 64);
  EXPECT_EQ(embd->ne[1], 512);
  EXPECT_EQ(embd->nbytes, 64u * 512u * 4u);
  int blocks = 0;
  for (const TensorInfo& t : f->tensors()) {
    if (t.name.ends_with(".attn_q.weight")) ++blocks;
    EXPECT_NE(t.data, nullptr) << t.name;
    EXPECT_EQ(t.offset % f->alignment(), 0u) << t.name;
  }
  EXPECT_EQ(blocks, 5);
  EXPECT_NE(f->find_tensor("blk.4.ffn_down.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.5.ffn_down.weight"), nullptr);

  // The file maps read-only and the embedding holds finite numbers.
  std::vector<float> row(64);
  std::memcpy(row.data(), embd->data, row.size() * sizeof(float));
  for (float x : row) EXPECT_TRUE(std::isfinite(x));
}

// The values of tensor "w" ([2, 4] F32) in the file write_small_file makes.
const std::vector<float> kSmallWeights = {1, 2, 3, 4, 5, 6, 7, 8};

// A GGUF file with one key and tensor "w"; returns its path.
std::string write_small_file(const std::string& name) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("w", 0, std::vector<int64_t>{4, 2}, kSmallWeights.data(), 32);
  const std::string path = test::temp_dir() + "/" + name;
  w.write(path);
  return path;
}

TEST(GgufReader, OpenBufferMatchesOpen) {
  const std::vector<float>& weights = kSmallWeights;
  const std::string path = write_small_file("buf.gguf");
  const std::string bytes = test::read_file(path);
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());

  const auto a = GgufFile::open(path);
  const auto b = GgufFile::open_buffer("buffer", copy.data(), copy.size());
  EXPECT_EQ(b->path(), "buffer");
  EXPECT_EQ(a->file_size(), b->file_size());
  EXPECT_EQ(a->metadata().size(), b->metadata().size());
  ASSERT_EQ(b->tensors().size(), 1u);
  EXPECT_EQ(b->tensors()[0].offset, a->tensors()[0].offset);
  EXPECT_EQ(std::memcmp(b->tensors()[0].data, weights.data(), 32), 0);
  EXPECT_EQ((b->tensors()[0].data - copy.data()) % 32, 0);  // data section starts aligned
}

// Only a private copy (Load::Read) can be edited; the file and other images never change.
TEST(GgufReader, EditInPlaceOnlyInAPrivateCopy) {
  const std::vector<float>& weights = kSmallWeights;
  const std::string path = write_small_file("edit.gguf");
  const std::string before = test::read_file(path);
  const std::vector<uint8_t> copy(before.begin(), before.end());
  const auto swap_rows = [](uint8_t* d) {
    uint8_t row[16];
    std::memcpy(row, d, 16);
    std::memcpy(d, d + 16, 16);
    std::memcpy(d + 16, row, 16);
  };

  const auto mapped = GgufFile::open(path);
  const auto buffer = GgufFile::open_buffer("buffer", copy.data(), copy.size());
  for (GgufFile* f : {mapped.get(), buffer.get()}) {
    EXPECT_FALSE(f->edit_in_place(f->tensors()[0].data, 32, swap_rows));
    EXPECT_EQ(std::memcmp(f->tensors()[0].data, weights.data(), 32), 0);
  }

  EXPECT_FALSE(mapped->is_private_copy());
  // Auto reads or maps (by the machine), and either way sees the file's bytes.
  const auto chosen = GgufFile::open(path, GgufFile::Load::Auto);
  EXPECT_EQ(std::memcmp(chosen->tensors()[0].data, weights.data(), 32), 0);

  const auto read = GgufFile::open(path, GgufFile::Load::Read);
  EXPECT_TRUE(read->is_private_copy());
  const TensorInfo& t = read->tensors()[0];
  EXPECT_TRUE(read->edit_in_place(t.data, 32, swap_rows));
  const std::vector<float> swapped = {5, 6, 7, 8, 1, 2, 3, 4};
  EXPECT_EQ(std::memcmp(t.data, swapped.data(), 32), 0);
  EXPECT_EQ(test::read_file(path), before);
  // A range reaching past the image, or outside it, is refused before anything is written.
  EXPECT_THROW(read->edit_in_place(t.data + 16, read->file_size(), swap_rows), Error);
  EXPECT_THROW(read->edit_in_place(weights.data(), 4, swap_rows), Error);
  EXPECT_EQ(std::memcmp(t.data, swapped.data(), 32), 0);
}

TEST(GgufReader, IntegerConversions) {
  GgufWriter w;
  w.set_u32("u", 7);
  w.set_i32("neg", -7);
  w.set_u64("big", uint64_t{1} << 40);
  w.set_f32("f", 2.5f);
  w.set_bool("b", true);
  const std::vector<int32_t> ints = {3, -4};
  w.set_i32_array("ints", ints);
  const std::string path = test::temp_dir() + "/conv.gguf";
  w.write(path);
  const auto f = GgufFile::open(path);
  EXPECT_EQ(*f->get_int("u"), 7);
  EXPECT_EQ(*f->get_int("neg"), -7);
  EXPECT_EQ(*f->get_int("big"), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(*f->get_float("u"), 7.0);
  EXPECT_DOUBLE_EQ(*f->get_float("neg"), -7.0);
  EXPECT_DOUBLE_EQ(*f->get_float("f"), 2.5);
  EXPECT_THROW(f->get_int("f"), Error);  // no silent truncation of floats
  EXPECT_THROW(f->get_int("b"), Error);
  EXPECT_THROW(f->get_bool("u"), Error);
  EXPECT_EQ(*f->get_float_array("ints"), (std::vector<float>{3.0f, -4.0f}));
  EXPECT_EQ(*f->get_int_array("ints"), (std::vector<int64_t>{3, -4}));
  EXPECT_FALSE(f->get_float("absent").has_value());
  EXPECT_FALSE(f->has("absent"));
  EXPECT_TRUE(f->has("u"));
}

TEST(GgufReader, FormatsValues) {
  GgufWriter w;
  w.set_string("s", "a \"quoted\"\nline");
  w.set_u32("u", 42);
  w.set_i32("i", -3);
  w.set_f32("f", 0.1f);
  w.set_bool("b", false);
  w.set_string_array("sa", {"x", "y"});
  std::vector<int32_t> many(20);
  for (int i = 0; i < 20; ++i) many[i] = i;
  w.set_i32_array("many", many);
  const std::vector<float> two = {1.5f, -0.25f};
  w.set_f32_array("two", two);
  w.set_string("long", std::string(500, 'z'));
  const std::string path = test::temp_dir() + "/fmt.gguf";
  w.write(path);
  const auto f = GgufFile::open(path);
  auto fmt = [&](const char* key) { return GgufFile::format_value(*f->find(key)); };
  EXPECT_EQ(fmt("s"), "\"a \\\"quoted\\\"\\nline\"");
  EXPECT_EQ(fmt("u"), "42");
  EXPECT_EQ(fmt("i"), "-3");
  EXPECT_EQ(fmt("f"), "0.1");
  EXPECT_EQ(fmt("b"), "false");
  EXPECT_EQ(fmt("sa"), "[\"x\", \"y\"]");
  EXPECT_EQ(fmt("many"), "[0, 1, 2, 3, 4, 5, 6, 7, ...] (20 i32)");
  EXPECT_EQ(GgufFile::format_value(*f->find("many"), 2), "[0, 1, ...] (20 i32)");
  EXPECT_EQ(fmt("two"), "[1.5, -0.25]");
  EXPECT_NE(fmt("long").find("(500 bytes)"), std::string::npos);
  EXPECT_LT(fmt("long").size(), 200u);
  EXPECT_EQ(value_type_name(ValueType::F64), "f64");
}

// Auto reads the file into memory only where huge pages back it and it leaves at least half of
// the available memory free; an explicit choice is never changed.
TEST(GgufReader, AutoLoadReadsSmallFilesWhereHugePagesExist) {
  using Load = GgufFile::Load;
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  EXPECT_EQ(GgufFile::resolve_load(Load::Auto, 2 * kGiB, 16 * kGiB, true), Load::Read);
  EXPECT_EQ(GgufFile::resolve_load(Load::Auto, 8 * kGiB, 16 * kGiB, true), Load::Read);
  EXPECT_EQ(GgufFile::resolve_load(Load::Auto, 8 * kGiB + 1, 16 * kGiB, true), Load::Mmap);
  EXPECT_EQ(GgufFile::resolve_load(Load::Auto, 2 * kGiB, 16 * kGiB, false), Load::Mmap);
  EXPECT_EQ(GgufFile::resolve_load(Load::Auto, 1, 0, true), Load::Mmap);  // unknown memory
  EXPECT_EQ(GgufFile::resolve_load(Load::Mmap, 1, 16 * kGiB, true), Load::Mmap);
  EXPECT_EQ(GgufFile::resolve_load(Load::Read, 64 * kGiB, 16 * kGiB, false), Load::Read);
}

}  // namespace
}  // namespace hearth::gguf
