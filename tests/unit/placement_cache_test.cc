// The placement cache: round trips, what the key covers, and that a missing, truncated, corrupt
// or foreign file is a miss with a reason (never a crash), and an unwritable place a clean false.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "common/test_util.h"
#include "gguf/gguf.h"
#include "sparse/placement_cache.h"
#include "unit/placement_test_util.h"

namespace hearth::sparse {
namespace {

namespace fs = std::filesystem;
using placement_test::make_layer;

// Layers of every kind: no FFN, hot neurons with and without a predictor, none hot, no attention.
PlacementRequest sample_request() {
  std::mt19937 rng(3);
  PlacementRequest r;
  r.budget_bytes = 2500;
  r.layers.push_back(make_layer(100, 20, 0, 4, {}));
  r.layers.push_back(make_layer(100, 20, 50, 4, placement_test::power_law(rng, 300)));
  r.layers.push_back(make_layer(100, 20, 0, 6, placement_test::power_law(rng, 300)));
  r.layers.push_back(make_layer(100, 20, 50, 4, std::vector<float>(10, 0.0f)));
  r.layers.push_back(make_layer(5000, 20, 50, 4, placement_test::power_law(rng, 300)));
  return r;
}

struct Saved {
  std::string path;
  uint64_t key = 0;
  Placement placement;
};

Saved save_sample() {
  Saved s;
  s.path = hearth::test::temp_dir() + "/model.gguf.hearth-placement.gguf";
  const PlacementRequest r = sample_request();
  s.key = placement_key("model.gguf 123 456", r);
  s.placement = solve_placement(r);
  std::string error;
  EXPECT_TRUE(save_placement_cache(s.path, s.key, s.placement, &error)) << error;
  return s;
}

TEST(PlacementCache, PathIsBesideTheModel) {
  EXPECT_EQ(placement_cache_path("/m/llama.gguf"), "/m/llama.gguf.hearth-placement.gguf");
}

TEST(PlacementCache, RoundTripGivesTheSamePlacement) {
  const Saved s = save_sample();
  ASSERT_FALSE(s.placement.layers[1].hot.empty());
  ASSERT_TRUE(s.placement.layers[3].hot.empty());
  ASSERT_FALSE(s.placement.layers[4].attention);
  std::string why;
  const auto loaded = load_placement_cache(s.path, s.key, &why);
  ASSERT_TRUE(loaded) << why;
  placement_test::expect_same_placement(s.placement, *loaded);

  // A PowerInfer-style view of the same answer: gpu_idx marks exactly the bucket.
  const auto file = gguf::GgufFile::open(s.path);
  const gguf::TensorInfo* idx = file->find_tensor("blk.1.gpu_idx");
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(idx->ne[0], 300);
  EXPECT_EQ(file->find_tensor("blk.3.gpu_bucket"), nullptr);  // nothing hot: left out
  EXPECT_EQ(file->find_tensor("blk.0.gpu_idx"), nullptr);     // n_ff = 0: left out
}

TEST(PlacementCache, RoundTripKeepsAnUnlimitedBudget) {
  PlacementRequest r = sample_request();
  r.budget_bytes = std::numeric_limits<uint64_t>::max();
  const Placement p = solve_placement(r);
  const std::string path = hearth::test::temp_dir() + "/unlimited.gguf";
  ASSERT_TRUE(save_placement_cache(path, 7, p, nullptr));
  const auto loaded = load_placement_cache(path, 7, nullptr);
  ASSERT_TRUE(loaded);
  placement_test::expect_same_placement(p, *loaded);
}

TEST(PlacementCache, KeyIsStableAndCoversEveryInput) {
  const PlacementRequest base = sample_request();
  const uint64_t k = placement_key("m", base);
  EXPECT_EQ(k, placement_key("m", sample_request()));
  EXPECT_EQ(k, placement_key("m", base, kPlacementSolverVersion));
  // Pinned: the key must not change between builds or platforms (bump kPlacementSolverVersion
  // rather than change the encoding).
  PlacementRequest tiny;
  tiny.budget_bytes = 1000;
  tiny.layers.push_back(make_layer(1, 2, 3, 4, {0.5f, 0.25f}));
  EXPECT_EQ(placement_key("tiny", tiny, 1), 0x4118faa4ec8456f8ull) << std::hex << placement_key("tiny", tiny, 1);

  std::vector<PlacementRequest> changed(12, base);
  changed[0].budget_bytes += 1;
  changed[1].strategy = PlacementStrategy::Layers;
  changed[2].layers[1].attention_bytes += 1;
  changed[3].layers[1].kv_bytes += 1;  // another context size or session count
  changed[4].layers[1].predictor_bytes += 1;
  changed[5].layers[1].neuron_bytes += 1;
  changed[6].layers[2].frequency[7] += 0.001f;
  changed[7].layers[2].frequency.clear();
  changed[8].layers[0].n_ff = 1;
  changed[9].layers.pop_back();
  std::swap(changed[10].layers[1], changed[10].layers[2]);
  changed[11].layers[4].kv_bytes -= 1;
  std::set<uint64_t> keys{k, placement_key("m2", base), placement_key("m", base, kPlacementSolverVersion + 1)};
  for (const PlacementRequest& r : changed) keys.insert(placement_key("m", r));
  EXPECT_EQ(keys.size(), changed.size() + 3);
}

TEST(PlacementCache, MissingFileIsAMissWithAReason) {
  std::string why;
  EXPECT_FALSE(load_placement_cache(hearth::test::temp_dir() + "/absent.gguf", 1, &why));
  EXPECT_NE(why.find("no placement cache"), std::string::npos) << why;
}

TEST(PlacementCache, AnotherKeyIsAMiss) {
  const Saved s = save_sample();
  std::string why;
  EXPECT_FALSE(load_placement_cache(s.path, s.key + 1, &why));
  EXPECT_NE(why.find("another model"), std::string::npos) << why;
}

TEST(PlacementCache, AnotherGgufIsAMiss) {
  const std::string path = hearth::test::temp_dir() + "/other.gguf";
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.write(path);
  std::string why;
  EXPECT_FALSE(load_placement_cache(path, 1, &why));
  EXPECT_NE(why.find("not a placement cache"), std::string::npos) << why;
  hearth::test::write_file(path, "this is not a GGUF file at all");
  EXPECT_FALSE(load_placement_cache(path, 1, &why));
  EXPECT_FALSE(why.empty());
}

TEST(PlacementCache, TruncatedFilesAreMisses) {
  const Saved s = save_sample();
  const std::string bytes = hearth::test::read_file(s.path);
  // Past the last tensor's data the file holds only alignment padding: cutting that loses nothing.
  const auto layout = gguf::GgufFile::open_buffer("x", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  size_t data_end = 0;
  for (const gguf::TensorInfo& t : layout->tensors()) {
    data_end = std::max<size_t>(data_end, static_cast<size_t>(t.data - reinterpret_cast<const uint8_t*>(bytes.data())) + t.nbytes);
  }
  const std::string cut = s.path + ".cut";
  const size_t step = std::max<size_t>(1, bytes.size() / 120);
  for (size_t n = 0; n < bytes.size(); n += n + step < data_end ? step : 1) {
    hearth::test::write_file(cut, bytes.substr(0, n));
    std::string why;
    const bool loaded = load_placement_cache(cut, s.key, &why).has_value();
    EXPECT_EQ(loaded, n >= data_end) << n << " of " << bytes.size() << ": " << why;
    EXPECT_TRUE(loaded || !why.empty()) << n;
  }
}

// Random damage: a miss with a reason, or (when the damage hit the note or padding) a placement
// that still passes every check. Never a crash.
TEST(PlacementCache, CorruptFilesAreMissesOrConsistent) {
  const Saved s = save_sample();
  const std::string bytes = hearth::test::read_file(s.path);
  const std::string bad = s.path + ".bad";
  std::mt19937 rng(11);
  int misses = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = bytes;
    const int flips = 1 + trial % 4;
    for (int i = 0; i < flips; ++i) {
      damaged[std::uniform_int_distribution<size_t>(0, damaged.size() - 1)(rng)] ^=
          static_cast<char>(1 << std::uniform_int_distribution<int>(0, 7)(rng));
    }
    hearth::test::write_file(bad, damaged);
    std::string why;
    const auto p = load_placement_cache(bad, s.key, &why);
    if (!p) {
      ++misses;
      EXPECT_FALSE(why.empty());
      continue;
    }
    ASSERT_EQ(p->layers.size(), s.placement.layers.size());  // the damage was harmless
    EXPECT_LE(p->bytes, p->budget_bytes);
    for (const LayerPlacement& l : p->layers) {
      EXPECT_TRUE(std::is_sorted(l.hot.begin(), l.hot.end()));
      EXPECT_TRUE(l.hot.empty() || (l.hot.front() >= 0 && l.hot.back() < l.n_ff));
    }
  }
  EXPECT_GT(misses, 100);
}

// Damage that keeps the GGUF valid: only the placement checks can catch it.
TEST(PlacementCache, InconsistentContentIsAMiss) {
  const Saved s = save_sample();
  const std::string bytes = hearth::test::read_file(s.path);
  const auto layout = gguf::GgufFile::open_buffer("x", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto offset = [&](const char* name) {
    return static_cast<size_t>(layout->find_tensor(name)->data - reinterpret_cast<const uint8_t*>(bytes.data()));
  };
  auto expect_miss = [&](size_t at, int32_t value, const char* needle) {
    std::string damaged = bytes;
    std::memcpy(damaged.data() + at, &value, 4);
    const std::string path = s.path + ".tampered";
    hearth::test::write_file(path, damaged);
    std::string why;
    EXPECT_FALSE(load_placement_cache(path, s.key, &why)) << needle;
    EXPECT_NE(why.find(needle), std::string::npos) << why;
  };
  const std::vector<int32_t>& hot = s.placement.layers[1].hot;
  ASSERT_GE(hot.size(), 3u);
  expect_miss(offset("blk.1.gpu_bucket") + 4, hot[0], "ascending");             // a repeated id
  expect_miss(offset("blk.1.gpu_bucket"), 300, "gpu_bucket");                   // past n_ff
  expect_miss(offset("blk.1.gpu_idx") + 4 * static_cast<size_t>(hot[0]), 2, "gpu_idx");
  expect_miss(offset("blk.1.gpu_idx") + 4 * static_cast<size_t>(hot[0]), 0, "gpu_idx");  // count
}

TEST(PlacementCache, SaveRefusesAPlacementTheSolverCannotMake) {
  Saved s = save_sample();
  Placement p = s.placement;
  std::swap(p.layers[1].hot[0], p.layers[1].hot[1]);
  std::string error;
  EXPECT_FALSE(save_placement_cache(s.path, s.key, p, &error));
  EXPECT_NE(error.find("ascending"), std::string::npos) << error;
  p = s.placement;
  p.bytes += 1;
  EXPECT_FALSE(save_placement_cache(s.path, s.key, p, &error));
  EXPECT_TRUE(load_placement_cache(s.path, s.key, nullptr)) << "the old file is untouched";
}

TEST(PlacementCache, UnwritablePlaceIsACleanFalse) {
  const Saved s = save_sample();
  const std::string dir = hearth::test::temp_dir();
  std::string error;
  EXPECT_FALSE(save_placement_cache(dir + "/no/such/dir/x.gguf", s.key, s.placement, &error));
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  hearth::test::write_file(dir + "/file", "x");  // a file where a directory should be: fails even as root
  EXPECT_FALSE(save_placement_cache(dir + "/file/x.gguf", s.key, s.placement, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(save_placement_cache(dir + "/file/x.gguf", s.key, s.placement, nullptr));
}

TEST(PlacementCache, SavingAgainReplacesTheFileAndLeavesNoTemporary) {
  Saved s = save_sample();
  ASSERT_TRUE(save_placement_cache(s.path, s.key + 1, s.placement, nullptr));
  EXPECT_FALSE(load_placement_cache(s.path, s.key, nullptr));
  EXPECT_TRUE(load_placement_cache(s.path, s.key + 1, nullptr));
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(fs::path(s.path).parent_path())) ++files;
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace hearth::sparse
