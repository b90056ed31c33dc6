// GgufWriter -> GgufFile round trips: every value type, tensors of several ggml types, alignment,
// and the write-to-temporary-then-rename behaviour.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf.h"

namespace hearth::gguf {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

template <typename T>
Value numeric_array(ValueType elem, const std::vector<T>& values) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = elem;
  v.count = values.size();
  v.data = reinterpret_cast<const uint8_t*>(values.data());
  return v;
}

Value scalar(ValueType t) {
  Value v;
  v.type = t;
  return v;
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  GgufWriter w;
  w.set_string("s", "hello \xe2\x96\x81world");
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -123456);
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set_f32("f32", 1.5e-5f);
  w.set_bool("t", true);
  w.set_bool("f", false);
  w.set_string_array("sa", {"a", "", "long string"});
  const std::vector<float> fa = {0.5f, -2.0f, 3.25f};
  w.set_f32_array("fa", fa);
  const std::vector<int32_t> ia = {1, -2, 2147483647};
  w.set_i32_array("ia", ia);

  Value u8 = scalar(ValueType::U8);
  u8.u = 255;
  Value i8 = scalar(ValueType::I8);
  i8.i = -128;
  Value u16 = scalar(ValueType::U16);
  u16.u = 65535;
  Value i16 = scalar(ValueType::I16);
  i16.i = -32768;
  Value i64 = scalar(ValueType::I64);
  i64.i = std::numeric_limits<int64_t>::min();
  Value f64 = scalar(ValueType::F64);
  f64.f = 3.141592653589793;
  w.copy_value("u8", u8);
  w.copy_value("i8", i8);
  w.copy_value("u16", u16);
  w.copy_value("i16", i16);
  w.copy_value("i64", i64);
  w.copy_value("f64", f64);
  const std::vector<uint16_t> a16 = {1, 65535};
  const std::vector<int64_t> a64 = {-5, 1LL << 40};
  const std::vector<double> ad = {0.25, -1e10};
  const std::vector<uint8_t> ab = {1, 0, 1};
  w.copy_value("a16", numeric_array(ValueType::U16, a16));
  w.copy_value("a64", numeric_array(ValueType::I64, a64));
  w.copy_value("ad", numeric_array(ValueType::F64, ad));
  w.copy_value("ab", numeric_array(ValueType::BOOL, ab));
  w.copy_value("empty", numeric_array(ValueType::U32, std::vector<uint32_t>{}));

  const std::string path = test::temp_dir() + "/values.gguf";
  w.write(path);
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_FALSE(f->is_powerinfer());
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_TRUE(f->tensors().empty());
  ASSERT_EQ(f->metadata().size(), 21u);
  EXPECT_EQ(f->metadata()[0].first, "s");  // file order is kept

  EXPECT_EQ(*f->get_string("s"), "hello \xe2\x96\x81world");
  EXPECT_EQ(*f->get_int("u32"), 4000000000LL);
  EXPECT_EQ(*f->get_int("i32"), -123456);
  EXPECT_EQ(f->find("u64")->u, std::numeric_limits<uint64_t>::max());
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("f32")), 1.5e-5f);
  EXPECT_TRUE(*f->get_bool("t"));
  EXPECT_FALSE(*f->get_bool("f"));
  EXPECT_EQ(*f->get_string_array("sa"), (std::vector<std::string_view>{"a", "", "long string"}));
  EXPECT_EQ(*f->get_float_array("fa"), fa);
  EXPECT_EQ(*f->get_int_array("ia"), (std::vector<int64_t>{1, -2, 2147483647}));
  EXPECT_EQ(*f->get_int("u8"), 255);
  EXPECT_EQ(*f->get_int("i8"), -128);
  EXPECT_EQ(*f->get_int("u16"), 65535);
  EXPECT_EQ(*f->get_int("i16"), -32768);
  EXPECT_EQ(*f->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_DOUBLE_EQ(*f->get_float("f64"), 3.141592653589793);
  EXPECT_EQ(*f->get_int_array("a16"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(*f->get_int_array("a64"), (std::vector<int64_t>{-5, 1LL << 40}));
  EXPECT_EQ(*f->get_float_array("ad"), (std::vector<float>{0.25f, -1e10f}));
  EXPECT_EQ(f->find("ab")->elem_type, ValueType::BOOL);
  EXPECT_EQ(f->find("ab")->count, 3u);
  EXPECT_TRUE(f->get_int_array("empty")->empty());

  // Copying every value of the file into a new writer reproduces the file byte for byte.
  GgufWriter copy;
  for (const auto& [key, v] : f->metadata()) copy.copy_value(key, v);
  const std::string path2 = test::temp_dir() + "/copy.gguf";
  copy.write(path2);
  EXPECT_EQ(test::read_file(path), test::read_file(path2));
}

TEST(GgufWriter, RoundTripsTensorsOfSeveralTypes) {
  struct Case {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
  };
  const std::vector<Case> cases = {
      {"f32.3d", 0, {5, 3, 2}, 5 * 3 * 2 * 4},
      {"f16.vec", 1, {7}, 7 * 2},
      {"q4_0.mat", 2, {64, 3}, 2 * 3 * 18},
      {"q8_0.mat", 8, {32, 5}, 5 * 34},
      {"bf16.4d", 30, {2, 2, 2, 2}, 16 * 2},
      {"q4_k.row", 12, {256, 1}, 144},
  };
  std::vector<std::vector<uint8_t>> payloads;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  for (size_t i = 0; i < cases.size(); ++i) {
    payloads.push_back(pattern(cases[i].nbytes, static_cast<uint8_t>(i)));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    w.add_tensor(cases[i].name, cases[i].type, cases[i].ne, payloads[i].data(), cases[i].nbytes);
  }
  const std::string path = test::temp_dir() + "/tensors.gguf";
  w.write(path);

  const auto f = GgufFile::open(path);
  ASSERT_EQ(f->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(f->find_tensor(cases[i].name), &t);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.n_dims, static_cast<int>(cases[i].ne.size()));
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) {
      const int64_t expect = d < t.n_dims ? cases[i].ne[d] : 1;
      EXPECT_EQ(t.ne[d], expect);
      n *= expect;
    }
    EXPECT_EQ(t.n_elements(), n);
    EXPECT_EQ(t.nbytes, cases[i].nbytes);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.nbytes), 0);
  }
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
}

TEST(GgufWriter, HonorsAlignmentAndPowerInferMagic) {
  const auto data = pattern(40 * 4, 3);
  GgufWriter w;
  w.set_alignment(256);
  w.set_magic_powerinfer(true);
  w.add_tensor("a", 0, std::vector<int64_t>{10}, data.data(), 40);
  w.add_tensor("b", 0, std::vector<int64_t>{30}, data.data() + 40, 120);
  const std::string path = test::temp_dir() + "/aligned.gguf";
  w.write(path);

  const std::string bytes = test::read_file(path);
  EXPECT_EQ(bytes.substr(0, 4), "PWRI");
  const auto f = GgufFile::open(path);
  EXPECT_TRUE(f->is_powerinfer());
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(*f->get_int("general.alignment"), 256);
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.offset % 256, 0u) << t.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 256, 0u) << t.name;  // mapping is page aligned
  }
  EXPECT_EQ(std::memcmp(f->find_tensor("b")->data, data.data() + 40, 120), 0);

  // Setting the default again drops the key.
  GgufWriter w2;
  w2.set_alignment(64);
  w2.set_alignment(32);
  const std::string path2 = test::temp_dir() + "/default.gguf";
  w2.write(path2);
  EXPECT_FALSE(GgufFile::open(path2)->has("general.alignment"));
}

TEST(GgufWriter, ReplacesKeysAndOverwritesFiles) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/m.gguf";
  test::write_file(path, "old contents");
  GgufWriter w;
  w.set_u32("n", 1);
  w.set_string("other", "x");
  w.set_u32("n", 2);
  w.write(path);
  const auto f = GgufFile::open(path);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "n");
  EXPECT_EQ(*f->get_int("n"), 2);
  // No temporary file is left beside the target.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST(GgufWriter, RejectsBadTensors) {
  const auto data = pattern(1024, 1);
  GgufWriter w;
  w.add_tensor("ok", 0, std::vector<int64_t>{4}, data.data(), 16);
  auto expect_error = [&](const std::vector<int64_t>& ne, uint32_t type, uint64_t nbytes,
                          const std::string& name, const std::string& needle) {
    try {
      w.add_tensor(name, type, ne, data.data(), nbytes);
      ADD_FAILURE() << "no error for " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  expect_error({4}, 0, 16, "ok", "duplicate");
  expect_error({4}, 0, 12, "short", "bytes of data");
  expect_error({33}, 8, 34, "q8.bad", "block size");
  expect_error({4}, 77, 16, "weird", "unknown ggml type id 77");
  expect_error({1, 1, 1, 1, 1}, 0, 4, "five", "5 dimensions");
  expect_error({4, 0}, 0, 0, "zero", "dimension 1");
  expect_error({-4}, 0, 16, "negative", "dimension 0");
  EXPECT_THROW(w.set_alignment(48), Error);
  EXPECT_THROW(w.set_string("general.alignment", "64"), Error);
  EXPECT_THROW(w.set_string("", "x"), Error);
}

TEST(GgufWriter, FailedWriteNamesPathAndLeavesNothing) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/missing-dir/m.gguf";
  GgufWriter w;
  w.set_u32("x", 1);
  try {
    w.write(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace hearth::gguf
