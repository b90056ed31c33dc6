#include "calib/imatrix.h"

#include <algorithm>
#include <vector>

#include "calib/windows.h"
#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "hearth/session.h"
#include "model/model_internals.h"

namespace hearth::calib {
namespace {

// Sums in double: a column's sum over millions of tokens would lose the small terms in float.
struct Accumulator {
  std::vector<double> sum2;
  std::vector<double> gram;  // upper triangle used while summing, [cols * cols]
  int64_t count = 0;
};

class ImatrixCollector : public MatmulObserver {
 public:
  explicit ImatrixCollector(int64_t gram_budget) : gram_left_(gram_budget) {}

  void observe(const std::string& name, int64_t n, const float* x, int64_t cols) override {
    Accumulator& a = sums_[name];
    if (a.sum2.empty()) {
      a.sum2.assign(static_cast<size_t>(cols), 0.0);
      const int64_t bytes = cols * cols * static_cast<int64_t>(sizeof(double));
      if (bytes <= gram_left_) {
        a.gram.assign(static_cast<size_t>(cols * cols), 0.0);
        gram_left_ -= bytes;
      }
    }
    if (static_cast<int64_t>(a.sum2.size()) != cols) {
      fail("tensor ", name, " was multiplied by rows of ", cols, " and of ", a.sum2.size(),
           " values");
    }
    for (int64_t t = 0; t < n; ++t) {
      const float* row = x + t * cols;
      for (int64_t j = 0; j < cols; ++j) a.sum2[j] += static_cast<double>(row[j]) * row[j];
      if (a.gram.empty()) continue;
      for (int64_t i = 0; i < cols; ++i) {
        const double xi = row[i];
        double* g = &a.gram[static_cast<size_t>(i * cols)];
        for (int64_t j = i; j < cols; ++j) g[j] += xi * row[j];
      }
    }
    a.count += n;
  }
  const std::map<std::string, Accumulator>& sums() const { return sums_; }

 private:
  std::map<std::string, Accumulator> sums_;
  int64_t gram_left_;
};

}  // namespace

Imatrix collect_imatrix(const std::shared_ptr<const Model>& model, const ImatrixOptions& o) {
  if (o.window < 8) fail("the window must be at least 8 tokens (got ", o.window, ")");
  std::vector<int32_t> tokens = tokenize_text(*model, o.text, "imatrix text");
  if (o.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > o.max_tokens) {
    tokens.resize(static_cast<size_t>(o.max_tokens));
  }
  if (static_cast<int64_t>(tokens.size()) < o.window) {
    fail("the text has ", tokens.size(), " tokens, fewer than one window of ", o.window);
  }
  ImatrixCollector collector(o.gram_budget);
  SessionOptions so;
  so.n_threads = o.n_threads;
  so.sparse = SparseMode::Dense;
  so.matmul_observer = &collector;
  run_windows(model, tokens, so, o.window, o.log, "imatrix");

  Imatrix m;
  m.datasets.push_back(o.dataset_name);
  m.chunk_size = static_cast<uint32_t>(o.window);
  m.chunk_count = static_cast<uint32_t>((tokens.size() + o.window - 1) / o.window);
  const gguf::GgufFile& file = model_file(*model);
  for (const auto& [name, a] : collector.sums()) {
    ImatrixEntry& e = m.entries[name];
    e.sum2.assign(a.sum2.begin(), a.sum2.end());
    e.count = static_cast<double>(a.count);
    const int64_t cols = static_cast<int64_t>(a.sum2.size());
    if (!a.gram.empty()) {
      e.gram.resize(a.gram.size());
      for (int64_t i = 0; i < cols; ++i) {
        for (int64_t j = i; j < cols; ++j) {
          e.gram[i * cols + j] = e.gram[j * cols + i] = static_cast<float>(a.gram[i * cols + j]);
        }
      }
    }
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) continue;  // named by the weight list, so always there; no probe otherwise
    std::vector<float> row(static_cast<size_t>(t->ne[0]));
    dequantize_row(static_cast<DType>(t->type), t->data, row.data(), t->ne[0]);
    e.probe.assign(row.begin(), row.begin() + std::min<int64_t>(t->ne[0], kImatrixProbeLength));
  }
  return m;
}

}  // namespace hearth::calib
