// A Session holds the state of one or more conversations with a Model: a KV cache per sequence,
// activation buffers and a thread pool. Buffers are sized at construction, so evaluating tokens
// never allocates. Several sequences evaluated in one forward pass (eval_batch) read the weights
// once for all of them: that is how a server batches its clients.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hearth/model.h"
#include "hearth/types.h"

namespace hearth {

// Sees the activations of every FFN layer as a dense session computes them; calibration's
// profiler implements it. Called on the thread that calls eval(), once per layer and batch.
class FfnObserver {
 public:
  virtual ~FfnObserver() = default;
  // p[n, n_embd]: the predictor's input for the n tokens of the batch; act[n, n_ff]: the
  // activation the sparse modes decide on (act(gate), or act(up) without a gate); h[n, n_ff]:
  // the input of the down projection (act(gate) · up, or act(up)).
  virtual void observe(int32_t layer, int64_t n, const float* p, const float* act,
                       const float* h) = 0;
};

// Sees the input rows of every weight matrix product of a dense session, by the tensor's GGUF name
// (`hearth imatrix` sums their squares). Called on the thread that calls eval(), once per matrix
// and batch; products of matrices the model made for itself (a transposed copy) are not reported.
class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  // x[n, cols]: the rows multiplied by the tensor `name` (ggml layout: rows of `cols` elements).
  virtual void observe(const std::string& name, int64_t n, const float* x, int64_t cols) = 0;
};

struct SessionOptions {
  int32_t n_ctx = 0;      // per sequence; 0: the model's training context, at most 4096
  int32_t n_threads = 0;  // 0: all hardware threads
  int32_t n_batch = 512;  // tokens evaluated per forward pass (all sequences together)
  int32_t n_seq = 1;      // sequences, each with its own KV cache of n_ctx positions
  KvType kv_type = KvType::F16;
  SparseMode sparse = SparseMode::Auto;
  // Predictor threshold: a neuron is active iff its score >= this. NaN: the model's
  // (per layer hearth.predictor_thresholds, else hearth.sparse_threshold or
  // powerinfer.sparse_threshold, else 0).
  float sparse_threshold = std::numeric_limits<float>::quiet_NaN();
  // In Predictor mode, also compute every neuron's true activation and count how well the
  // predictors did (recall, precision in SparseStats). Costs a dense gate; for measurement only.
  bool sparse_audit = false;
  // true: in the sparse modes every token gets the mode's masks, prompt tokens included, and its
  // result does not depend on how the tokens were batched (the batch size, the other sequences,
  // the prompt cache): a token's logits are the same bits as when it is a decode step alone.
  // false: prompts run the dense FFN and attention, as PowerInfer's prefill does, so the prompt's
  // KV cache is exact (`--dense-prompt`). A prompt's tokens then give the same bits however the
  // prompt is cut into passes when the caller marks them as a prompt (eval_prompt,
  // SeqTokens::prompt), and a generated token its lone decode step's bits in any pass; a token
  // evaluated unmarked runs as a prompt's in passes of more than 8 tokens and as a decode step's
  // in shorter ones, so its result depends on the batch. Unset: true, except where decode steps
  // read quantized input-major copies (model-wide thresholds, input_major_min_width), whose sums
  // prompts reproduce only by reading the copies token by token, which is slower. (Float copies
  // give the file's matrices' bits, so prompts there keep their speed.)
  std::optional<bool> sparse_prompt;
  // SparseMode::Threshold: per-layer thresholds to use instead of the file's ([n_layer]; empty:
  // the file's). Calibration searches with these.
  std::vector<LayerThresholds> thresholds;
  // Model-wide thresholds: decode steps read input-major copies of the projections (made once per
  // model) when n_embd is at least this; narrower models run the zeroed inputs through the dense
  // products, which is faster for their small matrices (docs/benchmarks.md).
  int32_t input_major_min_width = 512;
  // Not owned; must outlive the session. Only for SparseMode::Dense sessions.
  FfnObserver* ffn_observer = nullptr;
  // Not owned; must outlive the session. Only for SparseMode::Dense sessions of CPU-only models.
  MatmulObserver* matmul_observer = nullptr;
  // Record a timeline of the host's and the device's work (write_trace).
  bool trace = false;
};

// FFN neuron counts and weight traffic accumulated since the session was made (or
// reset_stats()). Neuron counts are summed over layers and decoded tokens.
struct SparseStats {
  uint64_t tokens = 0;           // tokens that went through the FFN
  uint64_t neurons_total = 0;    // n_ff per layer per token
  uint64_t neurons_active = 0;   // neurons computed
  uint64_t weight_bytes = 0;     // weight bytes read (all matrices, embeddings excluded)
  // Audit (SessionOptions::sparse_audit): neurons truly active, and those both truly active and
  // predicted.
  uint64_t audit_true = 0;
  uint64_t audit_hit = 0;

  double sparsity() const {
    return neurons_total ? 1.0 - static_cast<double>(neurons_active) / neurons_total : 0.0;
  }
  double bytes_per_token() const {
    return tokens ? static_cast<double>(weight_bytes) / tokens : 0.0;
  }
  // Threshold mode's input sparsity, per layer: the weights that the thresholded inputs' elements
  // multiply, and those skipped because their element was at or below its threshold.
  struct InputCount {
    uint64_t weights = 0;
    uint64_t skipped = 0;
  };
  std::vector<InputCount> inputs;  // [layers seen]

  void count_inputs(int32_t layer, uint64_t weights, uint64_t skipped) {
    if (inputs.size() <= static_cast<size_t>(layer)) inputs.resize(static_cast<size_t>(layer) + 1);
    inputs[static_cast<size_t>(layer)].weights += weights;
    inputs[static_cast<size_t>(layer)].skipped += skipped;
  }
  // The share of thresholded weights skipped: in one layer, or over all (layer < 0).
  double input_sparsity(int32_t layer = -1) const {
    InputCount c;
    for (size_t l = 0; l < inputs.size(); ++l) {
      if (layer >= 0 && l != static_cast<size_t>(layer)) continue;
      c.weights += inputs[l].weights;
      c.skipped += inputs[l].skipped;
    }
    return c.weights ? static_cast<double>(c.skipped) / static_cast<double>(c.weights) : 0.0;
  }

  double recall() const { return audit_true ? static_cast<double>(audit_hit) / audit_true : 1.0; }
  double precision() const {
    return neurons_active ? static_cast<double>(audit_hit) / neurons_active : 1.0;
  }
};

// Tokens appended to one sequence in an eval_batch() call.
struct SeqTokens {
  int32_t seq = 0;
  std::span<const int32_t> tokens;
  // The tokens are (part of) a prompt, not generated ones fed back: in sessions whose prompts run
  // dense (SessionOptions::sparse_prompt) they run dense however few they are. Unmarked chunks of
  // more than 8 tokens run as prompts too.
  bool prompt = false;
};

class Session {
 public:
  Session(std::shared_ptr<const Model> model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens at the end of the context and returns the logits [n_vocab] that predict the
  // token after the last one (valid until the next call). Throws hearth::Error if the tokens do
  // not fit in the context or an id is out of range.
  std::span<const float> eval(std::span<const int32_t> tokens);

  // eval for the tokens of a prompt (SeqTokens::prompt): in sessions whose prompts run dense, a
  // prompt evaluated in pieces (of any size) gives the bits it gives in one pass.
  std::span<const float> eval_prompt(std::span<const int32_t> tokens);

  // Like eval, but returns the logits of every token: [tokens.size(), n_vocab], row-major.
  // `out` must hold tokens.size() * n_vocab floats.
  void eval_all(std::span<const int32_t> tokens, std::span<float> out);

  // Evaluates every chunk in ONE forward pass: each chunk's tokens are appended at the end of its
  // sequence's context, and the logits [n_vocab] after the last token of chunk i go to
  // logits[i * n_vocab, (i + 1) * n_vocab). Chunks are not empty, name distinct sequences, and hold
  // at most n_batch() tokens together; otherwise, or when a chunk overflows its sequence's
  // context, hearth::Error and nothing is evaluated.
  // A sequence's results do not depend on what it is batched with, bit for bit (each token's
  // matrix products, norms and attention are computed as if it were alone; the sparse modes
  // decide each chunk as SessionOptions::sparse_prompt says). One exception: a hybrid session
  // in dense mode splits the FFN with its device in passes of at most 8 tokens and runs longer
  // ones on the host, which round differently.
  void eval_batch(std::span<const SeqTokens> batch, std::span<float> logits);

  // The calls without a sequence (eval, eval_all, n_past, reset) act on sequence 0.
  int32_t n_past() const;  // tokens in the context
  int32_t n_past(int32_t seq) const;
  int32_t n_ctx() const;   // positions of each sequence
  int32_t n_seq() const;
  int32_t n_batch() const;
  int32_t n_threads() const;
  void reset();            // forget the context
  void reset(int32_t seq);
  // Keeps the first n tokens of the sequence's context (0 <= n <= n_past(seq)) and forgets the
  // rest: a new prompt that starts with those tokens continues from there (prompt caching).
  void truncate(int32_t seq, int32_t n);

  SparseMode sparse_mode() const;  // as resolved at construction (never Auto)
  // Whether a token's result is the same bits whether it was a prompt's or generated: the
  // session is dense or its prompts are sparse (SessionOptions::sparse_prompt, resolved). Where
  // not, a cached sequence's generated tokens are not what a prompt holding them would compute.
  bool prompt_matches_decode() const;
  const SparseStats& sparse_stats() const;
  void reset_stats();

  const Model& model() const;

  // Writes the timeline recorded since construction (SessionOptions::trace) as Chrome trace JSON;
  // throws hearth::Error when tracing is off or the file cannot be written.
  void write_trace(const std::string& path) const;
  // Share of the host's decode time during which the device was busy (0 without trace or device).
  double device_busy_fraction() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth
