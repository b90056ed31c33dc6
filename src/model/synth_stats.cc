// Activation statistics for synthetic models: how often each FFN neuron fires on random tokens,
// measured with a dense session and stored the way calibration stores them (blk.N.ffn_act_freq),
// so the placement solver can put the hot neurons of a `hearth synth` model on a device without a
// calibration run over text the synthetic vocabulary does not have.
#include <cstdio>
#include <random>

#include "core/error.h"
#include "gguf/gguf.h"
#include "hearth/session.h"
#include "model/model_impl.h"
#include "model/synth.h"

namespace hearth {
namespace {

// Counts, per layer and neuron, the tokens for which the activation is non-zero.
class FiringCounter : public FfnObserver {
 public:
  FiringCounter(int64_t n_layer, int64_t n_ff)
      : n_ff_(n_ff), counts_(static_cast<size_t>(n_layer), std::vector<uint32_t>(n_ff)) {}
  void observe(int32_t layer, int64_t n, const float*, const float* act, const float*) override {
    std::vector<uint32_t>& c = counts_[static_cast<size_t>(layer)];
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < n_ff_; ++i) c[static_cast<size_t>(i)] += act[t * n_ff_ + i] != 0.0f;
    }
  }
  const std::vector<uint32_t>& layer(size_t il) const { return counts_[il]; }

 private:
  int64_t n_ff_;
  std::vector<std::vector<uint32_t>> counts_;
};

}  // namespace

void add_activation_stats(const std::string& path, int64_t n_tokens, uint64_t seed,
                          int n_threads) {
  if (n_tokens <= 0) fail("synth: the statistics need at least one token");
  FiringCounter counter(0, 0);
  std::vector<std::vector<float>> freq;
  {
    const auto model = Model::load(path);
    const ModelConfig& c = model->config();
    counter = FiringCounter(c.n_layer, c.n_ff);
    SessionOptions o;
    o.sparse = SparseMode::Dense;
    o.n_threads = n_threads > 0 ? n_threads : 1;
    o.n_ctx = static_cast<int32_t>(std::min<int64_t>(n_tokens, c.n_ctx_train));
    o.ffn_observer = &counter;
    Session session(model, o);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c.n_vocab - 1));
    std::vector<int32_t> tokens(static_cast<size_t>(o.n_ctx));
    int64_t done = 0;
    while (done < n_tokens) {
      const int64_t n = std::min<int64_t>(n_tokens - done, o.n_ctx);
      tokens.resize(static_cast<size_t>(n));
      for (auto& t : tokens) t = pick(rng);
      session.reset();
      session.eval(tokens);
      done += n;
    }
    for (int64_t il = 0; il < c.n_layer; ++il) {
      const std::vector<uint32_t>& counts = counter.layer(static_cast<size_t>(il));
      std::vector<float>& f = freq.emplace_back(counts.size());
      for (size_t i = 0; i < counts.size(); ++i) f[i] = static_cast<float>(counts[i]) / n_tokens;
    }
  }

  // Rewrite the file with the statistics, through a temporary file renamed over it.
  const auto in = gguf::GgufFile::open(path, gguf::GgufFile::Load::Read);
  gguf::GgufWriter w;
  w.set_magic_powerinfer(in->is_powerinfer());
  for (const auto& [key, value] : in->metadata()) w.copy_value(key, value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)),
                 t.data, t.nbytes);
  }
  w.set_u64("hearth.synth.stats_tokens", static_cast<uint64_t>(n_tokens));
  for (size_t il = 0; il < freq.size(); ++il) {
    const int64_t ne[1] = {static_cast<int64_t>(freq[il].size())};
    w.add_tensor("blk." + std::to_string(il) + ".ffn_act_freq", static_cast<uint32_t>(DType::F32),
                 ne, freq[il].data(), freq[il].size() * sizeof(float));
  }
  const std::string tmp = path + ".stats.tmp";
  w.write(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("synth: cannot replace ", path);
  }
}

}  // namespace hearth
