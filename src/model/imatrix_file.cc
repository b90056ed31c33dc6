// The imatrix GGUF layout (llama.cpp's, from its GGUF imatrix files): general.type = "imatrix",
// imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size, and per matrix NAME two F32 tensors,
// NAME.in_sum2 [cols] and NAME.counts [1]. Hearth adds NAME.probe, which llama.cpp's reader skips
// (it ignores tensors with other suffixes), and optionally NAME.in_gram [cols, cols].
#include "model/imatrix_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"

namespace hearth {
namespace {

constexpr const char* kSum2 = ".in_sum2";
constexpr const char* kCounts = ".counts";
constexpr const char* kProbe = ".probe";
constexpr const char* kGram = ".in_gram";
// Probes further than this from the model's rows (relative RMS, the median over the entries) are
// another model's. Quantization moves a Q4_0 row by ~10%; stories260K-relu, a fine-tune of
// stories260K, differs from it by ~50%, independently trained models by ~140%.
constexpr double kProbeTolerance = 0.25;

bool strip_suffix(std::string& s, std::string_view suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  s.resize(s.size() - suffix.size());
  return true;
}

// The tensor's values; sums and counts must also be >= 0 (`non_negative`), probes are weights.
std::vector<float> f32_values(const gguf::TensorInfo& t, const std::string& path,
                              bool non_negative = true) {
  if (t.type != static_cast<uint32_t>(DType::F32)) {
    fail("imatrix ", path, ": tensor ", t.name, " is not F32");
  }
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  for (const float x : v) {
    if (!std::isfinite(x) || (non_negative && x < 0.0f)) {
      fail("imatrix ", path, ": tensor ", t.name, " holds a ",
           non_negative ? "negative or non-finite" : "non-finite", " value");
    }
  }
  return v;
}

}  // namespace

void write_imatrix(const Imatrix& m, const std::string& path) {
  gguf::GgufWriter w;
  w.set_string("general.type", "imatrix");
  w.set_string_array("imatrix.datasets", m.datasets);
  w.set_u32("imatrix.chunk_count", m.chunk_count);
  w.set_u32("imatrix.chunk_size", m.chunk_size);
  constexpr auto kF32 = static_cast<uint32_t>(DType::F32);
  std::vector<float> counts;  // stable storage: the writer borrows tensor data until write()
  counts.reserve(m.entries.size());
  for (const auto& [name, e] : m.entries) {
    const int64_t cols = static_cast<int64_t>(e.sum2.size());
    w.add_tensor(name + kSum2, kF32, std::vector<int64_t>{cols}, e.sum2.data(),
                 e.sum2.size() * sizeof(float));
    counts.push_back(static_cast<float>(e.count));
    w.add_tensor(name + kCounts, kF32, std::vector<int64_t>{1}, &counts.back(), sizeof(float));
    if (!e.probe.empty()) {
      w.add_tensor(name + kProbe, kF32, std::vector<int64_t>{static_cast<int64_t>(e.probe.size())},
                   e.probe.data(), e.probe.size() * sizeof(float));
    }
    if (!e.gram.empty()) {
      w.add_tensor(name + kGram, kF32, std::vector<int64_t>{cols, cols}, e.gram.data(),
                   e.gram.size() * sizeof(float));
    }
  }
  w.write(path);
}

Imatrix read_imatrix(const std::string& path) {
  std::unique_ptr<gguf::GgufFile> f;
  try {
    f = gguf::GgufFile::open(path);
  } catch (const Error& e) {
    fail("cannot read imatrix ", path, ": ", e.what());
  }
  if (f->get_string("general.type").value_or("") != "imatrix") {
    fail("imatrix ", path, " is not an importance matrix (general.type is not \"imatrix\"; "
         "a model file given by mistake?)");
  }
  Imatrix m;
  for (const std::string_view d : f->get_string_array("imatrix.datasets").value_or(
           std::vector<std::string_view>{})) {
    m.datasets.emplace_back(d);
  }
  m.chunk_count = static_cast<uint32_t>(f->get_int("imatrix.chunk_count").value_or(0));
  m.chunk_size = static_cast<uint32_t>(f->get_int("imatrix.chunk_size").value_or(0));
  std::set<std::string> with_counts;
  for (const gguf::TensorInfo& t : f->tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, kSum2)) {
      if (t.n_elements() != t.ne[0]) {
        fail("imatrix ", path, ": ", t.name, " has several matrices (expert models are not "
             "supported)");
      }
      m.entries[name].sum2 = f32_values(t, path);
    } else if (strip_suffix(name, kCounts)) {
      if (t.n_elements() != 1) fail("imatrix ", path, ": ", t.name, " is not one count");
      m.entries[name].count = f32_values(t, path)[0];
      with_counts.insert(name);
    } else if (strip_suffix(name, kGram)) {
      if (t.n_dims != 2 || t.ne[0] != t.ne[1]) fail("imatrix ", path, ": ", t.name, " is not square");
      m.entries[name].gram = f32_values(t, path, /*non_negative=*/false);
    } else if (strip_suffix(name, kProbe)) {
      m.entries[name].probe = f32_values(t, path, /*non_negative=*/false);
    }
  }
  for (const auto& [name, e] : m.entries) {
    if (e.sum2.empty() || with_counts.count(name) == 0) {
      fail("imatrix ", path, ": ", name, " lacks its ", e.sum2.empty() ? "in_sum2" : "counts",
           " tensor");
    }
    if (!e.gram.empty() && e.gram.size() != e.sum2.size() * e.sum2.size()) {
      fail("imatrix ", path, ": ", name, "'s in_gram does not match its ", e.sum2.size(),
           " columns");
    }
  }
  if (m.entries.empty()) fail("imatrix ", path, " has no entries");
  return m;
}

void check_imatrix_fits(const Imatrix& m, const std::string& imatrix_path,
                        const gguf::GgufFile& model_file, const std::vector<std::string>& matrices) {
  const std::set<std::string> known(matrices.begin(), matrices.end());
  std::vector<std::pair<double, std::string>> differences;
  for (const auto& [name, e] : m.entries) {
    const gguf::TensorInfo* t = known.count(name) ? model_file.find_tensor(name) : nullptr;
    if (t == nullptr) {
      fail("imatrix ", imatrix_path, " has an entry for ", name,
           ", which is not a weight matrix of this model: it was made for another model");
    }
    if (static_cast<int64_t>(e.sum2.size()) != t->ne[0]) {
      fail("imatrix ", imatrix_path, ": ", name, " has ", e.sum2.size(), " columns there but ",
           t->ne[0], " in the model: it was made for another model");
    }
    if (e.probe.empty()) continue;
    const int64_t n = static_cast<int64_t>(e.probe.size());
    if (n > t->ne[0]) fail("imatrix ", imatrix_path, ": ", name, "'s probe is longer than a row");
    std::vector<float> row(static_cast<size_t>(t->ne[0]));
    dequantize_row(static_cast<DType>(t->type), t->data, row.data(), t->ne[0]);
    double diff = 0.0, norm = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      diff += (row[j] - e.probe[j]) * static_cast<double>(row[j] - e.probe[j]);
      norm += static_cast<double>(row[j]) * row[j];
    }
    const double rel = norm > 0.0 ? std::sqrt(diff / norm) : (diff > 0.0 ? INFINITY : 0.0);
    differences.emplace_back(rel, name);
  }
  if (differences.empty()) return;
  // The median: one matrix a fine-tune left alone, or one rounded badly, decides nothing.
  std::sort(differences.begin(), differences.end());
  const auto& [median, name] = differences[differences.size() / 2];
  if (median > kProbeTolerance) {
    fail("imatrix ", imatrix_path, " was made for another model: the first rows of its matrices "
         "differ from this model's by ", static_cast<int>(median * 100), "% (median; e.g. ", name,
         ")");
  }
}

}  // namespace hearth
