#include "hearth/session.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "model/config.h"
#include "model/session_impl.h"
#include "model/weights.h"

namespace hearth {

namespace {

// MatmulObserver behind the context's address-keyed hook: names come from the architecture's
// weight list over the model's bound weights. The first name wins for a shared address (a tied
// output is token_embd's data; Falcon's wq starts attn_qkv); addresses not in the list (views
// such as Falcon's wk, copies the model made) are not reported.
class NamedMatmulHook : public cpu::MatmulHook {
 public:
  NamedMatmulHook(const Model::Impl& model, MatmulObserver& observer) : observer_(observer) {
    Weights copy = model.weights;  // visiting binds nothing new: every spec is bound already
    visit_weights(model.config, copy, [&](const WeightSpec& spec) {
      if (spec.matrix && spec.matrix->present()) names_.emplace(spec.matrix->data, spec.name);
    });
  }
  void on_matmul(const void* weights, const float* x, int64_t n, int64_t cols) override {
    const auto it = names_.find(weights);
    if (it != names_.end()) observer_.observe(it->second, n, x, cols);
  }

 private:
  MatmulObserver& observer_;
  std::unordered_map<const void*, std::string> names_;
};

std::unique_ptr<cpu::MatmulHook> named_matmul_hook(const Model::Impl& model,
                                                   MatmulObserver& observer) {
  return std::make_unique<NamedMatmulHook>(model, observer);
}

int32_t resolve_ctx(const SessionOptions& o, const ModelConfig& c) {
  if (o.n_ctx < 0) fail("the context size must not be negative (got ", o.n_ctx, ")");
  const int64_t n = o.n_ctx > 0 ? o.n_ctx : default_context(c);
  return static_cast<int32_t>(n);
}

int32_t resolve_seq(const SessionOptions& o) {
  if (o.n_seq < 1) fail("a session needs at least 1 sequence (got n_seq = ", o.n_seq, ")");
  return o.n_seq;
}

// A pass holds at most every sequence's whole context.
int32_t resolve_batch(const SessionOptions& o, int32_t n_ctx, int32_t n_seq) {
  const int64_t most = std::min<int64_t>(static_cast<int64_t>(n_ctx) * n_seq, INT32_MAX);
  return static_cast<int32_t>(std::clamp<int64_t>(o.n_batch, 1, most));
}

// Layers whose attention the device runs keep their caches there.
std::vector<bool> host_cache_layers(const Model::Impl& m) {
  std::vector<bool> here(static_cast<size_t>(m.config.n_layer), true);
  for (size_t il = 0; m.device && il < here.size(); ++il) here[il] = !m.device_attention[il];
  return here;
}

KvCache make_kv_cache(const SessionOptions& o, const Model::Impl& m, const AttentionParams& attn) {
  return KvCache(attn, resolve_seq(o), host_cache_layers(m));
}

sparse::FfnShape session_ffn_shape(const Model::Impl& m, int32_t n_batch) {
  int64_t max_hidden = 0;
  for (const LayerWeights& l : m.weights.layers) max_hidden = std::max(max_hidden, l.fc1.rows);
  return sparse::ffn_shape(m.config, m.config.n_ff, max_hidden, n_batch,
                           !m.neuron_order.empty());
}

}  // namespace

Session::Impl::Impl(std::shared_ptr<const Model> m, const SessionOptions& o)
    : model_ref_(std::move(m)),
      model_(model_ref_->impl()),
      config_(model_.config),
      attn_(attention_params(config_, resolve_ctx(o, config_), o.kv_type)),
      n_batch_(resolve_batch(o, static_cast<int32_t>(attn_.n_ctx), resolve_seq(o))),
      ctx_(std::max(1, o.n_threads)),
      rope_(rope_params(config_, attn_.n_ctx), attn_.n_ctx),
      sparsity_(o, *model_ref_),
      kv_(make_kv_cache(o, model_, attn_)),
      pass_(kv_.n_seq(), n_batch_),
      buf_(config_, attn_, n_batch_, ctx_.n_threads(), sparsity_.mode() == SparseMode::Threshold,
           sparsity_.input_major_rows(n_batch_)),
      attn_scratch_(buf_.attention()),
      ffn_(session_ffn_shape(model_, n_batch_),
           sparse::FfnMode{sparsity_.mode(), sparsity_.audit(), sparsity_.sparse_prompt(),
                           o.ffn_observer}),
      logits_(static_cast<size_t>(config_.n_vocab)) {
  const SparseMode mode = sparsity_.mode();
  if (model_.ffn_row_groups && mode != SparseMode::Dense) {
    fail("--sparse ", to_string(mode), " needs the FFN's rows as the file lays them out; it was ",
         "loaded with row groups (LoadOptions::row_groups; --no-repack keeps the file's layout)");
  }
  if (o.ffn_observer && mode != SparseMode::Dense) {
    fail("an FFN observer needs a dense session (got --sparse ", to_string(mode), ")");
  }
  if (o.matmul_observer) {
    // Sparse modes gather rows (no linear() call), so only a dense session sees every product.
    if (mode != SparseMode::Dense) {
      fail("a matmul observer needs a dense session (got --sparse ", to_string(mode), ")");
    }
    matmul_names_ = named_matmul_hook(model_, *o.matmul_observer);
    ctx_.set_matmul_hook(matmul_names_.get());
  }
  if (config_.rope_freq_base_swa > 0.0f) {
    rope_swa_ = RopeTable(sliding_rope_params(config_), attn_.n_ctx);
  }
  bind_ffn(o.sparse_threshold);
  open_device(o);
}

void Session::Impl::bind_ffn(float threshold_override) {
  const Weights& w = model_.weights;
  const SparseMode mode = sparsity_.mode();
  non_ffn_bytes_ = model_.non_ffn_bytes();
  const sparse::NeuronMajorDown* made = nullptr;
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    sparse::FfnWeights f{&l.ffn_gate,
                         &l.ffn_up,
                         &l.ffn_down,
                         &l.ffn_down_t,
                         &l.fc1,
                         &l.fc2,
                         l.ffn_up_b,
                         l.ffn_down_b,
                         static_cast<int32_t>(il),
                         sparsity_.ffn_threshold(config_, il, threshold_override)};
    f.order = model_.order(il);
    if (mode == SparseMode::Threshold) {
      f.down_threshold = sparsity_.thresholds()[il].down;
      f.in_threshold = sparsity_.thresholds()[il].ffn_in;
    }
    if (const sparse::InputMajor* im = sparsity_.input_major()) {
      f.gate_t = &im->layers[il].gate_t;
      f.up_t = &im->layers[il].up_t;
    }
    if (mode != SparseMode::Dense && !l.ffn_down_t.present()) {
      if (!made) made = &model_.neuron_major_down();
      f.down_t = &made->layers[il];
    }
    ffn_weights_.push_back(f);
  }
}

void Session::Impl::check_tokens(int32_t seq, std::span<const int32_t> tokens) const {
  kv_.check_room(seq, tokens.size());
  for (const int32_t t : tokens) {
    if (t < 0 || t >= config_.n_vocab) {
      fail("token id ", t, " is out of range [0, ", config_.n_vocab, ")");
    }
  }
}

void Session::Impl::check_batch(std::span<const SeqTokens> batch, size_t n_logits) const {
  if (batch.empty()) fail("eval_batch: the batch is empty");
  size_t total = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqTokens& b = batch[i];
    check_tokens(b.seq, b.tokens);
    if (b.tokens.empty()) fail("eval_batch: the chunk of sequence ", b.seq, " is empty");
    // Quadratic, but batches hold at most n_seq chunks, and a set would allocate.
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].seq == b.seq) {
        fail("eval_batch: sequence ", b.seq, " appears twice in one batch");
      }
    }
    total += b.tokens.size();
  }
  if (total > static_cast<size_t>(n_batch_)) {
    fail("eval_batch: ", total, " tokens in one batch; the session takes at most n_batch = ",
         n_batch_);
  }
  const size_t n_vocab = static_cast<size_t>(config_.n_vocab);
  if (n_logits < batch.size() * n_vocab) {
    fail("eval_batch: the output holds ", n_logits, " logits; ", batch.size(), " chunks need ",
         batch.size() * n_vocab);
  }
}

std::span<const float> Session::Impl::eval(std::span<const int32_t> tokens, bool prompt) {
  eval_tokens(tokens, logits_.data(), false, prompt);
  return logits_;
}

void Session::Impl::eval_all(std::span<const int32_t> tokens, std::span<float> out) {
  if (out.size() < tokens.size() * static_cast<size_t>(config_.n_vocab)) {
    fail("eval_all: the output holds too few logits");
  }
  eval_tokens(tokens, out.data(), true, false);
}

void Session::Impl::eval_tokens(std::span<const int32_t> tokens, float* out, bool all_rows,
                                bool prompt) {
  check_tokens(0, tokens);
  const size_t n_vocab = static_cast<size_t>(config_.n_vocab);
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(n_batch_)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(n_batch_));
    const SeqTokens chunk{0, tokens.subspan(i, n), prompt};
    forward({&chunk, 1}, all_rows ? out + i * n_vocab : out, all_rows);
  }
}

void Session::Impl::eval_batch(std::span<const SeqTokens> batch, std::span<float> logits) {
  check_batch(batch, logits.size());
  forward(batch, logits.data(), false);
}

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), options)) {}
Session::~Session() = default;

std::span<const float> Session::eval(std::span<const int32_t> tokens) {
  return impl_->eval(tokens, false);
}

std::span<const float> Session::eval_prompt(std::span<const int32_t> tokens) {
  return impl_->eval(tokens, true);
}

void Session::eval_all(std::span<const int32_t> tokens, std::span<float> out) {
  impl_->eval_all(tokens, out);
}

void Session::eval_batch(std::span<const SeqTokens> batch, std::span<float> logits) {
  impl_->eval_batch(batch, logits);
}

int32_t Session::n_past() const { return impl_->kv().n_past(0); }
int32_t Session::n_past(int32_t seq) const { return impl_->kv().n_past(seq); }
int32_t Session::n_ctx() const { return impl_->kv().n_ctx(); }
int32_t Session::n_seq() const { return impl_->kv().n_seq(); }
int32_t Session::n_batch() const { return impl_->n_batch(); }
int32_t Session::n_threads() const { return impl_->n_threads(); }
void Session::reset() { impl_->kv().truncate(0, 0); }
void Session::reset(int32_t seq) { truncate(seq, 0); }
void Session::truncate(int32_t seq, int32_t n) { impl_->kv().truncate(seq, n); }
const Model& Session::model() const { return impl_->model(); }
SparseMode Session::sparse_mode() const { return impl_->sparse_mode(); }
bool Session::prompt_matches_decode() const { return impl_->prompt_matches_decode(); }
const SparseStats& Session::sparse_stats() const { return impl_->stats(); }

void Session::write_trace(const std::string& path) const {
  if (!impl_->trace()) fail("no trace was recorded: make the session with tracing on (--trace)");
  impl_->trace()->write_json(path);
}

double Session::device_busy_fraction() const {
  return impl_->trace() && impl_->has_device() ? impl_->trace()->device_busy_fraction() : 0.0;
}
void Session::reset_stats() { impl_->stats() = SparseStats{}; }

}  // namespace hearth
