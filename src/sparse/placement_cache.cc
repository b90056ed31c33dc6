// Placement cache files (placement_cache.h); the keys and tensors are in docs/formats.md.
//
// The file is untrusted like any GGUF: a crash, a full disk or another program may have left
// anything under its name. Everything is checked on read (the GGUF reader checks the container;
// here every length, id, count and total), and any doubt is a miss: solving again is cheap.
#include "sparse/placement_cache.h"

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace hearth::sparse {
namespace {

constexpr const char* kArchitecture = "hearth.placement";
constexpr uint32_t kI32 = 26;  // ggml's GGML_TYPE_I32, the type PowerInfer's gpu_idx has

std::string key_name(const char* field) { return std::string("hearth.placement.") + field; }

std::string blk(size_t il, const char* name) {
  return "blk." + std::to_string(il) + "." + name;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

void set(std::string* out, const std::string& text) {
  if (out != nullptr) *out = text;
}

// FNV-1a over explicit little-endian encodings, so the key does not depend on the platform.
class Fnv1a {
 public:
  void byte(uint8_t b) { h_ = (h_ ^ b) * 1099511628211ull; }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void text(const std::string& s) {  // length first: ("ab", "c") and ("a", "bc") differ
    u64(s.size());
    for (const char c : s) byte(static_cast<uint8_t>(c));
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

// What solve_placement guarantees, checked before writing and after reading; "" when it holds.
std::string check_placement(const Placement& p) {
  uint64_t sum = 0;
  for (size_t il = 0; il < p.layers.size(); ++il) {
    const LayerPlacement& l = p.layers[il];
    if (l.n_ff < 0 || l.n_ff > std::numeric_limits<int32_t>::max()) {
      return str_cat("layer ", il, " has n_ff ", l.n_ff);
    }
    for (size_t j = 0; j < l.hot.size(); ++j) {
      if (l.hot[j] < 0 || l.hot[j] >= l.n_ff) {
        return str_cat("layer ", il, ": hot neuron ", l.hot[j], " is not below n_ff ", l.n_ff);
      }
      if (j > 0 && l.hot[j] <= l.hot[j - 1]) {
        return str_cat("layer ", il, ": hot neurons are not strictly ascending");
      }
    }
    if (l.predictor && l.hot.empty()) return str_cat("layer ", il, ": a predictor with no hot neuron");
    if (!l.hot.empty() && !l.attention) return str_cat("layer ", il, ": hot neurons without attention");
    if (__builtin_add_overflow(sum, l.bytes, &sum)) return "layer bytes overflow";
  }
  if (sum != p.bytes) return str_cat("layer bytes sum to ", sum, ", not ", p.bytes);
  if (p.bytes > p.budget_bytes) return str_cat(p.bytes, " bytes placed in a budget of ", p.budget_bytes);
  if (!(p.hot_share >= 0 && p.hot_share <= 1)) return str_cat("hot_share ", p.hot_share, " is not a share");
  return "";
}

// The reader's typed getters stop at INT64_MAX; budgets may be UINT64_MAX ("no limit").
uint64_t read_u64(const gguf::GgufFile& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr || v->type != gguf::ValueType::U64) fail(f.path(), ": ", key, " is missing or not a u64");
  return v->u;
}

std::vector<uint64_t> read_u64_array(const gguf::GgufFile& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr || v->type != gguf::ValueType::ARRAY || v->elem_type != gguf::ValueType::U64) {
    fail(f.path(), ": ", key, " is missing or not an array of u64");
  }
  std::vector<uint64_t> out(v->count);
  if (v->count > 0) std::memcpy(out.data(), v->data, v->count * sizeof(uint64_t));
  return out;
}

template <typename T>
T required(const gguf::GgufFile& f, const std::string& key, std::optional<T> v) {
  if (!v) fail(f.path(), ": ", key, " is missing");
  return *v;
}

std::vector<int64_t> read_layer_array(const gguf::GgufFile& f, const char* field, size_t n_layer,
                                      int64_t max) {
  const std::string key = key_name(field);
  const std::vector<int64_t> v = required(f, key, f.get_int_array(key));
  if (v.size() != n_layer) fail(f.path(), ": ", key, " has ", v.size(), " values for ", n_layer, " layers");
  for (const int64_t x : v) {
    if (x < 0 || x > max) fail(f.path(), ": ", key, " holds ", x, " (expected 0 to ", max, ")");
  }
  return v;
}

std::vector<int32_t> read_i32_tensor(const gguf::GgufFile& f, const std::string& name, int64_t n) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr || t->type != kI32 || t->n_dims != 1 || t->ne[0] != n) {
    fail(f.path(), ": tensor ", name, " is missing or not I32 [", n, "]");
  }
  std::vector<int32_t> out(static_cast<size_t>(n));
  std::memcpy(out.data(), t->data, out.size() * sizeof(int32_t));
  return out;
}

// One layer's hot list from blk.N.gpu_bucket, checked against blk.N.gpu_idx.
std::vector<int32_t> read_hot(const gguf::GgufFile& f, size_t il, int64_t n_ff, int64_t k) {
  if (n_ff == 0) return {};
  const std::vector<int32_t> idx = read_i32_tensor(f, blk(il, "gpu_idx"), n_ff);
  int64_t ones = 0;
  for (const int32_t x : idx) {
    if (x != 0 && x != 1) fail(f.path(), ": ", blk(il, "gpu_idx"), " holds ", x, " (expected 0 or 1)");
    ones += x;
  }
  if (ones != k) fail(f.path(), ": ", blk(il, "gpu_idx"), " marks ", ones, " neurons, hot_count says ", k);
  if (k == 0) return {};
  std::vector<int32_t> hot = read_i32_tensor(f, blk(il, "gpu_bucket"), k);
  for (const int32_t id : hot) {
    if (id < 0 || id >= n_ff || idx[static_cast<size_t>(id)] != 1) {
      fail(f.path(), ": ", blk(il, "gpu_bucket"), " holds ", id, ", which gpu_idx does not mark");
    }
  }
  return hot;  // strictly ascending: check_placement
}

Placement read_cache(const std::string& path, uint64_t key) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("no placement cache at ", path);
  const auto file = gguf::GgufFile::open(path);
  const gguf::GgufFile& f = *file;
  if (f.get_string("general.architecture") != std::string_view(kArchitecture)) {
    fail(path, ": not a placement cache (general.architecture is not ", kArchitecture, ")");
  }
  const uint64_t stored = read_u64(f, key_name("key"));
  if (stored != key) {
    fail(path, ": solved for another model, budget, context or solver (key ", hex(stored),
         ", this request's is ", hex(key), ")");
  }
  const int64_t version = required(f, key_name("solver_version"), f.get_int(key_name("solver_version")));
  if (version != kPlacementSolverVersion) {
    fail(path, ": solved by placement solver version ", version, ", this is ", kPlacementSolverVersion);
  }
  Placement p;
  p.budget_bytes = read_u64(f, key_name("budget_bytes"));
  p.bytes = read_u64(f, key_name("bytes"));
  p.hot_share = required(f, key_name("hot_share"), f.get_float(key_name("hot_share")));
  p.from_statistics = required(f, key_name("from_statistics"), f.get_bool(key_name("from_statistics")));
  p.note = std::string(required(f, key_name("note"), f.get_string(key_name("note"))));

  const size_t n = required(f, key_name("attention"), f.get_int_array(key_name("attention"))).size();
  const auto attention = read_layer_array(f, "attention", n, 1);
  const auto predictor = read_layer_array(f, "predictor", n, 1);
  const auto n_ff = read_layer_array(f, "n_ff", n, std::numeric_limits<int32_t>::max());
  const auto hot_count = read_layer_array(f, "hot_count", n, std::numeric_limits<int32_t>::max());
  const auto layer_bytes = read_u64_array(f, key_name("layer_bytes"));
  if (layer_bytes.size() != n) fail(path, ": ", key_name("layer_bytes"), " has ", layer_bytes.size(), " values for ", n, " layers");
  size_t tensors = 0;
  p.layers.resize(n);
  for (size_t il = 0; il < n; ++il) {
    LayerPlacement& l = p.layers[il];
    l.attention = attention[il] == 1;
    l.predictor = predictor[il] == 1;
    l.n_ff = n_ff[il];
    l.bytes = layer_bytes[il];
    if (hot_count[il] > l.n_ff) fail(path, ": layer ", il, " has ", hot_count[il], " hot of ", l.n_ff, " neurons");
    l.hot = read_hot(f, il, l.n_ff, hot_count[il]);
    tensors += (l.n_ff > 0 ? 1 : 0) + (l.hot.empty() ? 0 : 1);
  }
  if (f.tensors().size() != tensors) fail(path, ": ", f.tensors().size(), " tensors, expected ", tensors);
  const std::string problem = check_placement(p);
  if (!problem.empty()) fail(path, ": ", problem);
  return p;
}

}  // namespace

uint64_t placement_key(const std::string& model_identity, const PlacementRequest& request,
                       uint32_t solver_version) {
  Fnv1a h;
  h.text("hearth.placement");
  h.text(model_identity);
  h.u32(solver_version);
  h.u32(static_cast<uint32_t>(request.strategy));
  h.u64(request.budget_bytes);
  h.u64(request.layers.size());
  for (const LayerCosts& l : request.layers) {
    h.u64(l.attention_bytes);
    h.u64(l.kv_bytes);
    h.u64(l.predictor_bytes);
    h.u64(l.neuron_bytes);
    h.u64(static_cast<uint64_t>(l.n_ff));
    h.u64(l.frequency.size());
    for (const float f : l.frequency) h.u32(std::bit_cast<uint32_t>(f));
  }
  return h.value();
}

uint64_t placement_key(const std::string& model_identity, const PlacementRequest& request) {
  return placement_key(model_identity, request, kPlacementSolverVersion);
}

std::string placement_cache_path(const std::string& model_path) {
  return model_path + ".hearth-placement.gguf";
}

std::optional<Placement> load_placement_cache(const std::string& path, uint64_t key,
                                              std::string* why_not) {
  try {
    return read_cache(path, key);
  } catch (const std::exception& e) {
    set(why_not, e.what());
    return std::nullopt;
  }
}

bool save_placement_cache(const std::string& path, uint64_t key, const Placement& placement,
                          std::string* error) {
  const std::string problem = check_placement(placement);
  if (!problem.empty()) {
    set(error, str_cat("cannot cache this placement: ", problem));
    return false;
  }
  try {
    gguf::GgufWriter w;
    w.set_string("general.architecture", kArchitecture);
    w.set_u64(key_name("key"), key);
    w.set_u32(key_name("solver_version"), kPlacementSolverVersion);
    w.set_u64(key_name("budget_bytes"), placement.budget_bytes);
    w.set_u64(key_name("bytes"), placement.bytes);
    gguf::Value share;  // f64, so that a loaded placement equals the saved one
    share.type = gguf::ValueType::F64;
    share.f = placement.hot_share;
    w.copy_value(key_name("hot_share"), share);
    w.set_bool(key_name("from_statistics"), placement.from_statistics);
    w.set_string(key_name("note"), placement.note);
    std::vector<int32_t> attention, predictor, n_ff, hot_count;
    std::vector<uint64_t> bytes;
    for (const LayerPlacement& l : placement.layers) {
      attention.push_back(l.attention ? 1 : 0);
      predictor.push_back(l.predictor ? 1 : 0);
      n_ff.push_back(static_cast<int32_t>(l.n_ff));
      hot_count.push_back(static_cast<int32_t>(l.hot.size()));
      bytes.push_back(l.bytes);
    }
    w.set_i32_array(key_name("attention"), attention);
    w.set_i32_array(key_name("predictor"), predictor);
    w.set_i32_array(key_name("n_ff"), n_ff);
    w.set_i32_array(key_name("hot_count"), hot_count);
    gguf::Value layer_bytes;
    layer_bytes.type = gguf::ValueType::ARRAY;
    layer_bytes.elem_type = gguf::ValueType::U64;
    layer_bytes.count = bytes.size();
    layer_bytes.data = reinterpret_cast<const uint8_t*>(bytes.data());
    w.copy_value(key_name("layer_bytes"), layer_bytes);
    // GGUF tensors cannot be empty: gpu_idx is left out where n_ff is 0, gpu_bucket where no
    // neuron is hot (hot_count says which).
    for (size_t il = 0; il < placement.layers.size(); ++il) {
      const LayerPlacement& l = placement.layers[il];
      if (l.n_ff == 0) continue;
      const int64_t ne_idx[1] = {l.n_ff};
      w.add_tensor_lazy(blk(il, "gpu_idx"), kI32, ne_idx, static_cast<uint64_t>(l.n_ff) * 4,
                        [&l](uint8_t* dst) {
                          std::memset(dst, 0, static_cast<size_t>(l.n_ff) * 4);
                          const int32_t one = 1;
                          for (const int32_t id : l.hot) std::memcpy(dst + 4 * static_cast<size_t>(id), &one, 4);
                        });
      if (l.hot.empty()) continue;
      const int64_t ne_hot[1] = {static_cast<int64_t>(l.hot.size())};
      w.add_tensor(blk(il, "gpu_bucket"), kI32, ne_hot, l.hot.data(), l.hot.size() * 4);
    }
    w.write(path);
    return true;
  } catch (const std::exception& e) {
    set(error, e.what());
    return false;
  }
}

}  // namespace hearth::sparse
