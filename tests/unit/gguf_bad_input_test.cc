// Corrupt and hostile GGUF files, built byte by byte: each must fail with hearth::Error naming the
// file and the key or tensor at fault, never crash or allocate absurd amounts.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "gguf/gguf.h"

namespace hearth::gguf {
namespace {

// Little-endian GGUF image under construction.
struct Image {
  std::string bytes;

  Image& raw(std::string_view s) {
    bytes += s;
    return *this;
  }
  template <typename T>
  Image& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Image& u8(uint8_t v) { return put(v); }
  Image& u32(uint32_t v) { return put(v); }
  Image& u64(uint64_t v) { return put(v); }
  Image& str(std::string_view s) { return u64(s.size()).raw(s); }
  Image& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Image& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Image& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(type).u64(offset);
  }
  Image& pad(size_t align = 32) {
    while (bytes.size() % align != 0) bytes += '\0';
    return *this;
  }
  Image& zeros(size_t n) {
    bytes.append(n, '\0');
    return *this;
  }
};

// Parses from an exactly sized heap copy so that ASan would see any read past the end.
std::string parse_error(const std::string& bytes) {
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  try {
    GgufFile::open_buffer("bad.gguf", copy.data(), copy.size());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ERROR_HAS(bytes, ...)                                      \
  do {                                                                    \
    const std::string msg_ = parse_error(bytes);                          \
    for (const char* needle_ : {"bad.gguf: ", __VA_ARGS__}) {             \
      EXPECT_NE(msg_.find(needle_), std::string::npos) << msg_;           \
    }                                                                     \
  } while (0)

// A valid file whose last tensor ends exactly at end of file, so that every shorter prefix is
// invalid.
std::string valid_small_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("f", 0.5f);
  w.set_bool("b", true);
  w.set_string_array("tokens", {"<s>", "a", "bc"});
  const std::vector<int32_t> ids = {1, 2, 3};
  w.set_i32_array("ids", ids);
  const std::vector<uint8_t> data(32 * 4, 0x3c);
  w.add_tensor("x.weight", 0, std::vector<int64_t>{8, 2}, data.data(), 64);
  w.add_tensor("y.weight", 8, std::vector<int64_t>{32, 2}, data.data(), 68);
  w.add_tensor("z.weight", 1, std::vector<int64_t>{32}, data.data(), 64);
  const std::string path = test::temp_dir() + "/small.gguf";
  w.write(path);
  return test::read_file(path);
}

TEST(GgufBadInput, MissingAndEmptyFiles) {
  const std::string dir = test::temp_dir();
  try {
    GgufFile::open(dir + "/model.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open " + dir + "/model.gguf: No such file or directory");
  }
  test::write_file(dir + "/empty.gguf", "");
  try {
    GgufFile::open(dir + "/empty.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/empty.gguf: empty file"), std::string::npos);
  }
  EXPECT_THROW(GgufFile::open(dir), Error);  // a directory
  EXPECT_ERROR_HAS("", "empty file");
}

TEST(GgufBadInput, MagicAndVersion) {
  EXPECT_ERROR_HAS(Image().raw("\x7f" "ELF").u32(3).u64(0).u64(0).bytes, "not a GGUF file",
                   "7f 45 4c 46");
  EXPECT_ERROR_HAS("GG", "truncated", "magic");
  EXPECT_ERROR_HAS(Image().header(0, 0, 1).bytes, "version 1 is not supported");
  EXPECT_ERROR_HAS(Image().header(0, 0, 99).bytes, "unsupported GGUF version 99");
  EXPECT_ERROR_HAS(Image().header(0, 0, 0x03000000).bytes, "big-endian");
  EXPECT_EQ(parse_error(Image().header(0, 0, 2).bytes), "(no error)");
  EXPECT_EQ(parse_error(Image().raw("PWRI").u32(3).u64(0).u64(0).bytes), "(no error)");
}

TEST(GgufBadInput, EveryTruncationFails) {
  const std::string full = valid_small_file();
  ASSERT_EQ(parse_error(full), "(no error)");
  for (size_t len = 0; len < full.size(); ++len) {
    const std::string msg = parse_error(full.substr(0, len));
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << "length " << len << ": " << msg;
  }
  // The same through real files for a few lengths (mmap path).
  const std::string dir = test::temp_dir();
  for (size_t len : {size_t{3}, size_t{24}, full.size() / 2, full.size() - 1}) {
    const std::string path = dir + "/t" + std::to_string(len) + ".gguf";
    test::write_file(path, full.substr(0, len));
    EXPECT_THROW(GgufFile::open(path), Error) << len;
  }
}

TEST(GgufBadInput, AbsurdCounts) {
  EXPECT_ERROR_HAS(Image().header(0, uint64_t{1} << 60).zeros(64).bytes, "metadata key count");
  EXPECT_ERROR_HAS(Image().header(uint64_t{1} << 60, 0).zeros(64).bytes, "tensor count");
  EXPECT_ERROR_HAS(Image().header(~uint64_t{0}, ~uint64_t{0}).bytes, "count");
  // A huge string length in a key name, and in a value.
  EXPECT_ERROR_HAS(Image().header(0, 1).u64(~uint64_t{0}).zeros(16).bytes, "key #0",
                   "key name length");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("general.name").u32(8).u64(uint64_t{1} << 62).bytes,
                   "key 'general.name'", "string value length");
  // Array lengths that cannot fit.
  EXPECT_ERROR_HAS(Image().header(0, 1).str("arr").u32(9).u32(4).u64(uint64_t{1} << 61).bytes,
                   "key 'arr'", "array of 2305843009213693952 u32");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("toks").u32(9).u32(8).u64(~uint64_t{0}).bytes,
                   "key 'toks'", "strings cannot fit");
}

TEST(GgufBadInput, BadValues) {
  EXPECT_ERROR_HAS(Image().header(0, 1).str("k.type").u32(13).u32(0).bytes, "key 'k.type'",
                   "unknown value type 13");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("nest").u32(9).u32(9).u64(1).bytes, "key 'nest'",
                   "nested arrays");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("arr").u32(9).u32(44).u64(1).bytes, "key 'arr'",
                   "unknown value type 44");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("flag").u32(7).u8(2).bytes, "key 'flag'",
                   "bool value 2");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("").u32(4).u32(1).bytes, "key #0", "empty name");
  EXPECT_ERROR_HAS(Image().header(0, 2).kv_u32("dup.key", 1).kv_u32("dup.key", 2).bytes,
                   "duplicate key 'dup.key'");
  EXPECT_ERROR_HAS(Image().header(0, 1).kv_u32("general.alignment", 48).bytes,
                   "general.alignment", "power of two");
  EXPECT_ERROR_HAS(Image().header(0, 1).kv_u32("general.alignment", 0).bytes,
                   "general.alignment", "power of two");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("general.alignment").u32(10).u64(64).bytes,
                   "general.alignment", "expected u32");
  EXPECT_ERROR_HAS(Image().header(0, 1).str("\x1b[31mred").u32(7).u8(5).bytes, "\\x1b[31mred");
}

// One tensor after a valid header; `data_bytes` of zeros follow the aligned data start.
std::string one_tensor(std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                       size_t data_bytes) {
  return Image().header(1, 0).tensor("blk.0.attn_q.weight", ne, type, offset).pad().zeros(
      data_bytes).bytes;
}

TEST(GgufBadInput, BadTensorInfos) {
  EXPECT_EQ(parse_error(one_tensor({4, 2}, 0, 0, 32)), "(no error)");
  const char* name = "tensor 'blk.0.attn_q.weight'";
  EXPECT_ERROR_HAS(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32), name, "5 dimensions");
  EXPECT_ERROR_HAS(one_tensor({}, 0, 0, 32), name, "0 dimensions");
  EXPECT_ERROR_HAS(one_tensor({4, 0}, 0, 0, 32), name, "dimension 1 is zero");
  EXPECT_ERROR_HAS(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 32), name,
                   "more than 2^62 elements");
  EXPECT_ERROR_HAS(one_tensor({uint64_t{1} << 40, uint64_t{1} << 40, 1 << 20}, 0, 0, 32), name,
                   "2^62");
  EXPECT_ERROR_HAS(one_tensor({~uint64_t{0}}, 0, 0, 32), name, "dimension 0");
  EXPECT_ERROR_HAS(one_tensor({4}, 77, 0, 32), name, "unknown ggml type id 77");
  EXPECT_ERROR_HAS(one_tensor({33}, 8, 0, 64), name, "not a multiple of the q8_0 block size 32");
  EXPECT_ERROR_HAS(one_tensor({4}, 0, 4, 64), name, "data offset 4", "alignment 32");
  EXPECT_ERROR_HAS(one_tensor({4, 4}, 0, 0, 32), name, "extends past end of file");
  EXPECT_ERROR_HAS(one_tensor({4}, 0, 1 << 20, 32), name, "extends past end of file");
  EXPECT_ERROR_HAS(one_tensor({4}, 0, ~uint64_t{0} - 31, 32), name, "overflows");
  // i64 elements: 2^62 of them is 2^65 bytes.
  EXPECT_ERROR_HAS(one_tensor({uint64_t{1} << 62}, 27, 0, 32), name, "overflows 64 bits");
}

TEST(GgufBadInput, DuplicateAndEmptyTensorNames) {
  const std::string dup = Image()
                              .header(2, 0)
                              .tensor("tok_embd.weight", {8}, 0, 0)
                              .tensor("tok_embd.weight", {8}, 0, 32)
                              .pad()
                              .zeros(64)
                              .bytes;
  EXPECT_ERROR_HAS(dup, "duplicate tensor name 'tok_embd.weight'");
  EXPECT_ERROR_HAS(Image().header(1, 0).tensor("", {8}, 0, 0).pad().zeros(32).bytes, "tensor #0",
                   "empty name");
}

TEST(GgufBadInput, AlignmentKeyAppliesToOffsets) {
  const std::string ok = Image()
                             .header(1, 1)
                             .kv_u32("general.alignment", 64)
                             .tensor("t", {16}, 0, 64)
                             .pad(64)
                             .zeros(128)
                             .bytes;
  EXPECT_EQ(parse_error(ok), "(no error)");
  const std::string bad = Image()
                              .header(1, 1)
                              .kv_u32("general.alignment", 64)
                              .tensor("t", {16}, 0, 32)
                              .pad(64)
                              .zeros(128)
                              .bytes;
  EXPECT_ERROR_HAS(bad, "tensor 't'", "alignment 64");
}

TEST(GgufBadInput, GetterTypeErrorsNameTheKey) {
  const std::string bytes = Image()
                                .header(0, 3)
                                .str("name")
                                .u32(8)
                                .str("x")
                                .str("big")
                                .u32(10)
                                .u64(~uint64_t{0})
                                .str("bigs")
                                .u32(9)
                                .u32(10)
                                .u64(1)
                                .u64(~uint64_t{0})
                                .bytes;
  const std::vector<uint8_t> copy(bytes.begin(), bytes.end());
  const auto f = GgufFile::open_buffer("m.gguf", copy.data(), copy.size());
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message([&] { f->get_int("name"); }),
            "m.gguf: key 'name' has type string, expected an integer");
  EXPECT_NE(message([&] { f->get_int("big"); }).find("key 'big' value 18446744073709551615"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(*f->get_float("big"), 18446744073709551615.0);
  EXPECT_NE(message([&] { f->get_int_array("bigs"); }).find("key 'bigs' element 0"),
            std::string::npos);
  EXPECT_NE(message([&] { f->get_string_array("bigs"); }).find("array of u64"),
            std::string::npos);
  EXPECT_NE(message([&] { f->get_float("name"); }).find("key 'name'"), std::string::npos);
  EXPECT_NE(message([&] { f->get_bool("big"); }).find("key 'big'"), std::string::npos);
  EXPECT_NE(message([&] { f->get_string("big"); }).find("key 'big'"), std::string::npos);
  EXPECT_NE(message([&] { f->get_float_array("name"); }).find("key 'name'"), std::string::npos);
  EXPECT_FALSE(f->get_int("absent").has_value());
  EXPECT_FALSE(f->get_string_array("absent").has_value());
}

}  // namespace
}  // namespace hearth::gguf
