#include "hearth/session.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
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

SparseMode resolve_sparse_mode(const SessionOptions& o, const Model& m) {
  const SparseMode requested = o.sparse;
  if (requested == SparseMode::Auto) return m.impl().auto_sparse_mode();
  if (requested == SparseMode::Predictor && !m.has_predictors()) {
    fail(m.path(), ": --sparse predictor needs predictors (blk.N.fc1/fc2), which this model does "
         "not have; make them with hearth calibrate, or use --sparse oracle");
  }
  if (requested == SparseMode::Threshold && !m.has_thresholds() && o.thresholds.empty()) {
    fail(m.path(), ": --sparse threshold needs per-layer thresholds (hearth.*_thresholds), "
         "which this model does not have; make them with hearth calibrate --sparsity F");
  }
  if (!o.thresholds.empty() &&
      static_cast<int64_t>(o.thresholds.size()) != m.config().n_layer) {
    fail("the session got thresholds for ", o.thresholds.size(), " layers; the model has ",
         m.config().n_layer);
  }
  return requested;
}

// Whether thresholds skip inputs of the attention or of gate/up (model-wide files), whose
// products then read input-major copies in decode steps.
bool model_wide(const std::vector<LayerThresholds>& thresholds) {
  return std::any_of(thresholds.begin(), thresholds.end(), [](const LayerThresholds& t) {
    return t.attn_in > 0 || t.attn_out > 0 || t.ffn_in > 0;
  });
}

// Whether the session's sparse rows read input-major copies (made for model-wide thresholds on
// models at least input_major_min_width wide).
bool reads_input_major(const SessionOptions& o, const ModelConfig& c,
                       const std::vector<LayerThresholds>& thresholds) {
  return model_wide(thresholds) && c.n_embd >= o.input_major_min_width;
}

// SessionOptions::sparse_prompt, resolved.
bool resolve_sparse_prompt(const SessionOptions& o, const ModelConfig& c,
                           const std::vector<LayerThresholds>& thresholds) {
  if (o.sparse_prompt) return *o.sparse_prompt;
  return !reads_input_major(o, c, thresholds);
}

sparse::FfnShape session_ffn_shape(const Model::Impl& m, int32_t n_batch) {
  int64_t max_hidden = 0;
  for (const LayerWeights& l : m.weights.layers) max_hidden = std::max(max_hidden, l.fc1.rows);
  return sparse::ffn_shape(m.config, m.config.n_ff, max_hidden, n_batch,
                           !m.neuron_order.empty());
}

}  // namespace

Session::Impl::Impl(std::shared_ptr<const Model> m, const SessionOptions& o)
    : model_ref(std::move(m)),
      model(model_ref->impl()),
      config(model.config),
      n_ctx(resolve_ctx(o, config)),
      n_batch(resolve_batch(o, n_ctx, resolve_seq(o))),
      ctx(std::max(1, o.n_threads)),
      act(to_activation(config.ffn_act)),
      sparse_mode(resolve_sparse_mode(o, *model_ref)),
      thresholds(sparse_mode != SparseMode::Threshold ? std::vector<LayerThresholds>()
                 : o.thresholds.empty()                  ? config.thresholds
                                                         : o.thresholds),
      sparse_prompt(resolve_sparse_prompt(o, config, thresholds)),
      sparse_audit(o.sparse_audit && sparse_mode == SparseMode::Predictor),
      n_seq(resolve_seq(o)),
      n_past(static_cast<size_t>(n_seq), 0),
      chunks(static_cast<size_t>(n_seq)),
      chunk_rows(static_cast<size_t>(n_seq)),
      row_pos(static_cast<size_t>(n_batch)),
      ffn(session_ffn_shape(model, n_batch),
          sparse::FfnMode{sparse_mode, sparse_audit, sparse_prompt, o.ffn_observer}) {
  if (o.ffn_observer && sparse_mode != SparseMode::Dense) {
    fail("an FFN observer needs a dense session (got --sparse ", to_string(sparse_mode), ")");
  }
  if (o.matmul_observer) {
    // Sparse modes gather rows (no linear() call), so only a dense session sees every product.
    if (sparse_mode != SparseMode::Dense) {
      fail("a matmul observer needs a dense session (got --sparse ", to_string(sparse_mode), ")");
    }
    matmul_names = named_matmul_hook(model, *o.matmul_observer);
    ctx.set_matmul_hook(matmul_names.get());
  }
  const ModelConfig& c = config;
  attn = attention_params(c, n_ctx, o.kv_type);
  rope = RopeTable(rope_params(c, n_ctx), n_ctx);
  if (c.rope_freq_base_swa > 0.0f) rope_swa = RopeTable(sliding_rope_params(c), n_ctx);

  for (int64_t l = 0; l < c.n_layer; ++l) {
    // Layers whose attention the device runs keep their caches there.
    const bool on_device = model.device && model.device_attention[static_cast<size_t>(l)];
    const size_t bytes = on_device ? 0 : kv_cache_bytes(attn) * static_cast<size_t>(n_seq);
    k_cache.emplace_back(bytes);
    v_cache.emplace_back(bytes);
  }
  const size_t b = static_cast<size_t>(n_batch) * sizeof(float);
  const size_t q_dim = static_cast<size_t>(c.n_head * c.head_dim);
  x = AlignedBuffer(b * c.n_embd);
  xn = AlignedBuffer(b * c.n_embd);
  if (c.block.parallel) xa = AlignedBuffer(b * c.n_embd);
  q = AlignedBuffer(b * q_dim);
  k = AlignedBuffer(b * c.n_embd_kv());
  v = AlignedBuffer(b * c.n_embd_kv());
  att = AlignedBuffer(b * q_dim);
  attn_out = AlignedBuffer(b * c.n_embd);
  ffn_out = AlignedBuffer(b * c.n_embd);
  attn_ws = AlignedBuffer(attention_workspace_bytes(attn, ctx.n_threads()));
  if (sparse_mode == SparseMode::Threshold) masked = AlignedBuffer(b * c.n_embd);
  if (reads_input_major(o, c, thresholds)) {
    input_major = &model.input_major();
    const size_t widest = std::max(static_cast<size_t>(c.n_embd), q_dim);
    // Decode steps go through the copies, and so do prompts when they are sparse.
    const size_t rows = sparse_prompt ? static_cast<size_t>(n_batch)
                                      : std::min<size_t>(n_batch, sparse::kMaxSparseBatch);
    input_idx = AlignedBuffer(widest * rows * sizeof(int32_t));
    input_values = AlignedBuffer(widest * rows * sizeof(float));
    input_counts = AlignedBuffer(rows * sizeof(int64_t));
  }
  attn_scratch = AttentionScratch{xn.f32(),  q.f32(),        k.f32(),        v.f32(),
                                  att.f32(), attn_out.f32(), attn_ws.data(), masked.f32(),
                                  static_cast<int32_t*>(input_idx.data()), input_values.f32(),
                                  static_cast<int64_t*>(input_counts.data())};
  attn_chunks.resize(static_cast<size_t>(n_seq));
  logits.resize(static_cast<size_t>(c.n_vocab));
  bind_ffn(o.sparse_threshold);
  open_device(o);
}

// The threshold layer il decides with in the session's mode: the predictor's score threshold
// (the caller's override, else the file's per-layer or global one), or the gate magnitude one.
float Session::Impl::layer_threshold(size_t il, float override) const {
  switch (sparse_mode) {
    case SparseMode::Predictor:
      if (!std::isnan(override)) return override;
      return config.predictor_thresholds.empty() ? config.sparse_threshold
                                                 : config.predictor_thresholds[il];
    case SparseMode::Threshold: return thresholds[il].gate;
    default: return 0.0f;
  }
}

void Session::Impl::bind_ffn(float threshold_override) {
  const Weights& w = model.weights;
  non_ffn_bytes = model.non_ffn_bytes();
  const sparse::NeuronMajorDown* made = nullptr;
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    sparse::FfnWeights f{&l.ffn_gate, &l.ffn_up,  &l.ffn_down,  &l.ffn_down_t,
                         &l.fc1,      &l.fc2,     l.ffn_up_b, l.ffn_down_b,
                         static_cast<int32_t>(il), layer_threshold(il, threshold_override)};
    f.order = model.order(il);
    if (sparse_mode == SparseMode::Threshold) {
      f.down_threshold = thresholds[il].down;
      f.in_threshold = thresholds[il].ffn_in;
    }
    if (input_major) {
      f.gate_t = &input_major->layers[il].gate_t;
      f.up_t = &input_major->layers[il].up_t;
    }
    if (sparse_mode != SparseMode::Dense && !l.ffn_down_t.present()) {
      if (!made) made = &model.neuron_major_down();
      f.down_t = &made->layers[il];
    }
    ffn_weights.push_back(f);
  }
}

void Session::Impl::check_seq(int32_t seq) const {
  if (seq < 0 || seq >= n_seq) fail("sequence ", seq, " is out of range [0, ", n_seq, ")");
}

void Session::Impl::check_tokens(int32_t seq, std::span<const int32_t> tokens) const {
  check_seq(seq);
  const int32_t past = n_past[static_cast<size_t>(seq)];
  if (tokens.size() > static_cast<size_t>(n_ctx - past)) {
    fail("cannot evaluate ", tokens.size(), " tokens", n_seq > 1 ? str_cat(" in sequence ", seq) : "",
         ": the context holds ", past, " of ", n_ctx, " tokens");
  }
  for (const int32_t t : tokens) {
    if (t < 0 || t >= config.n_vocab) fail("token id ", t, " is out of range [0, ", config.n_vocab, ")");
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
      if (batch[j].seq == b.seq) fail("eval_batch: sequence ", b.seq, " appears twice in one batch");
    }
    total += b.tokens.size();
  }
  if (total > static_cast<size_t>(n_batch)) {
    fail("eval_batch: ", total, " tokens in one batch; the session takes at most n_batch = ",
         n_batch);
  }
  if (n_logits < batch.size() * static_cast<size_t>(config.n_vocab)) {
    fail("eval_batch: the output holds ", n_logits, " logits; ", batch.size(), " chunks need ",
         batch.size() * static_cast<size_t>(config.n_vocab));
  }
}

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), options)) {}
Session::~Session() = default;

std::span<const float> Session::eval(std::span<const int32_t> tokens) {
  impl_->check_tokens(0, tokens);
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(impl_->n_batch)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(impl_->n_batch));
    const SeqTokens chunk{0, tokens.subspan(i, n)};
    impl_->forward({&chunk, 1}, impl_->logits.data(), false);
  }
  return impl_->logits;
}

void Session::eval_all(std::span<const int32_t> tokens, std::span<float> out) {
  impl_->check_tokens(0, tokens);
  const size_t n_vocab = static_cast<size_t>(impl_->config.n_vocab);
  if (out.size() < tokens.size() * n_vocab) fail("eval_all: the output holds too few logits");
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(impl_->n_batch)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(impl_->n_batch));
    const SeqTokens chunk{0, tokens.subspan(i, n)};
    impl_->forward({&chunk, 1}, out.data() + i * n_vocab, true);
  }
}

void Session::eval_batch(std::span<const SeqTokens> batch, std::span<float> logits) {
  impl_->check_batch(batch, logits.size());
  impl_->forward(batch, logits.data(), false);
}

int32_t Session::n_past() const { return impl_->n_past[0]; }
int32_t Session::n_past(int32_t seq) const {
  impl_->check_seq(seq);
  return impl_->n_past[static_cast<size_t>(seq)];
}
int32_t Session::n_ctx() const { return impl_->n_ctx; }
int32_t Session::n_seq() const { return impl_->n_seq; }
int32_t Session::n_batch() const { return impl_->n_batch; }
int32_t Session::n_threads() const { return impl_->ctx.n_threads(); }
void Session::reset() { impl_->n_past[0] = 0; }
void Session::reset(int32_t seq) { truncate(seq, 0); }
// The cache rows past n stay as they are: attention reads only rows below a sequence's n_past,
// and the next tokens overwrite them.
void Session::truncate(int32_t seq, int32_t n) {
  impl_->check_seq(seq);
  int32_t& past = impl_->n_past[static_cast<size_t>(seq)];
  if (n < 0 || n > past) {
    fail("cannot truncate sequence ", seq, " to ", n, " tokens: it holds ", past);
  }
  past = n;
}
const Model& Session::model() const { return *impl_->model_ref; }
SparseMode Session::sparse_mode() const { return impl_->sparse_mode; }
const SparseStats& Session::sparse_stats() const { return impl_->stats; }

void Session::write_trace(const std::string& path) const {
  if (!impl_->trace) fail("no trace was recorded: make the session with tracing on (--trace)");
  impl_->trace->write_json(path);
}

double Session::device_busy_fraction() const {
  return impl_->trace && impl_->device ? impl_->trace->device_busy_fraction() : 0.0;
}
void Session::reset_stats() { impl_->stats = SparseStats{}; }

}  // namespace hearth
