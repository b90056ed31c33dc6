#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/synth_internal.h"
#include "model/synth_vocab.h"

namespace hearth {
namespace synth_detail {

void write_header(const SynthOptions& o, gguf::GgufWriter& w) {
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "hearth-synth");
  w.set_u32("general.file_type", static_cast<uint32_t>(o.type));
  w.set_u32("llama.context_length", static_cast<uint32_t>(o.n_ctx));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(o.n_embd));
  w.set_u32("llama.block_count", static_cast<uint32_t>(o.n_layer));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(o.n_ff));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(o.n_head));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(o.n_head_kv));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(o.n_embd / o.n_head));
  w.set_string("hearth.ffn_activation", to_string(o.act));

  const SynthVocab vocab = make_synth_vocab(o.n_vocab);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
}

SparseLayout sparse_layout(const SynthOptions& o) {
  SparseLayout l;
  l.width = o.predictor_width > 0 ? o.predictor_width : default_predictor_width(o);
  l.features = l.width - 1;
  l.first_feature = dtype_block_size(o.type);
  // Up to the end of the features' last block, so that the activation blocks the engine rounds to
  // Q8_0 hold only construction values, unless that would leave the layers nothing to write to.
  l.frozen = l.first_feature + l.features;
  const int64_t block = l.first_feature;
  const int64_t rounded = (l.frozen + block - 1) / block * block;
  if (rounded < o.n_embd) l.frozen = rounded;
  return l;
}

}  // namespace synth_detail

using synth_detail::Rng;
using synth_detail::TensorStore;

namespace {

void validate_sparse(const SynthOptions& o) {
  const double s = *o.sparsity;
  if (!(s > 0.0 && s < 1.0)) fail("synth: --sparsity must be between 0 and 1, exclusive (got ", s, ")");
  const double lo = 1.0 - kSynthMaxFrequency, hi = 1.0 - kSynthMinFrequency;
  if (s < lo || s > hi) {
    fail("synth: --sparsity ", s, " cannot be reached: neuron firing frequencies are kept within [",
         kSynthMinFrequency, ", ", kSynthMaxFrequency, "], so the sparsity must be between ", lo,
         " and ", hi);
  }
  if (!(o.skew >= 0.0 && o.skew <= kSynthMaxSkew)) {
    fail("synth: --skew must be between 0 and ", kSynthMaxSkew, " (got ", o.skew, ")");
  }
  if (o.act != FfnActivation::Relu) {
    fail("synth: --sparsity makes a ReGLU model and needs --act relu (got --act ", to_string(o.act), ")");
  }
  if (o.predictor_width < 0 || o.predictor_width == 1) {
    fail("synth: --predictor-rank must be at least 2 (got ", o.predictor_width, ")");
  }
  const synth_detail::SparseLayout l = synth_detail::sparse_layout(o);
  // The construction's coordinates, and at least one more for the layers to write to.
  if (l.first_feature + l.features >= o.n_embd) {
    const int64_t block = dtype_block_size(o.type);
    fail("synth: --n-embd ", o.n_embd, " is too small for a sparse ", dtype_name(o.type),
         " model with predictor width ", l.width, " (needs --n-embd of at least ",
         (l.first_feature + l.features) / block * block + block, "; or lower --predictor-rank)");
  }
}

}  // namespace

void validate(const SynthOptions& o) {
  auto positive = [](const char* flag, int64_t v) {
    if (v <= 0) fail("synth: ", flag, " must be positive (got ", v, ")");
  };
  positive("--n-embd", o.n_embd);
  positive("--n-layer", o.n_layer);
  positive("--n-ff", o.n_ff);
  positive("--n-head", o.n_head);
  positive("--n-head-kv", o.n_head_kv);
  positive("--n-ctx", o.n_ctx);
  if (o.n_embd % o.n_head != 0) fail("synth: --n-embd ", o.n_embd, " is not divisible by --n-head ", o.n_head);
  if (o.n_head % o.n_head_kv != 0) fail("synth: --n-head ", o.n_head, " is not divisible by --n-head-kv ", o.n_head_kv);
  if ((o.n_embd / o.n_head) % 2 != 0) fail("synth: the head size ", o.n_embd / o.n_head, " must be even (RoPE)");
  if (o.n_vocab < kSynthMinVocab) fail("synth: --n-vocab must be at least ", kSynthMinVocab, " (specials and bytes)");
  const int64_t block = dtype_block_size(o.type);
  if (o.n_embd % block != 0 || o.n_ff % block != 0) {
    fail("synth: --n-embd and --n-ff must be multiples of ", block, " for type ", dtype_name(o.type));
  }
  if (o.sparsity) {
    validate_sparse(o);
  } else if (o.predictor_width != 0) {
    fail("synth: --predictor-rank needs --sparsity (dense models have no predictors)");
  }
}

int64_t default_predictor_width(const SynthOptions& o) {
  const DType pt = o.type == DType::F32 ? DType::F32 : DType::F16;
  const double ffn_bytes = 2.0 * static_cast<double>(o.n_ff) * row_bytes(o.type, o.n_embd) +
                           static_cast<double>(o.n_embd) * row_bytes(o.type, o.n_ff);
  // One unit of width costs a row of fc1 and a column of fc2.
  const double per_unit = static_cast<double>(row_bytes(pt, o.n_embd) + o.n_ff * row_bytes(pt, 1));
  const auto budget = static_cast<int64_t>(0.08 * ffn_bytes / per_unit);
  return std::max<int64_t>(8, std::min(o.n_embd / 8, budget));
}

std::vector<double> synth_firing_frequencies(int64_t n_ff, double sparsity, double skew) {
  const double target = 1.0 - sparsity;
  auto make = [&](double log_c, std::vector<double>* out) {
    double sum = 0.0;
    for (int64_t k = 0; k < n_ff; ++k) {
      const double f = std::clamp(std::exp(log_c - skew * std::log(static_cast<double>(k + 1))),
                                  kSynthMinFrequency, kSynthMaxFrequency);
      if (out) (*out)[static_cast<size_t>(k)] = f;
      sum += f;
    }
    return sum / static_cast<double>(n_ff);
  };
  // The mean grows monotonically with C; bisect log C (the mean is flat only where every
  // frequency is clamped, which the bounds on sparsity rule out).
  double lo = std::log(kSynthMinFrequency) - 1.0;
  double hi = std::log(kSynthMaxFrequency) + skew * std::log(static_cast<double>(n_ff)) + 1.0;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    (make(mid, nullptr) < target ? lo : hi) = mid;
  }
  std::vector<double> f(static_cast<size_t>(n_ff));
  make(0.5 * (lo + hi), &f);
  return f;
}

void write_synthetic_model(const SynthOptions& o, const std::string& path) {
  validate(o);
  if (o.sparsity) {
    synth_detail::write_sparse_model(o, path);
    return;
  }
  gguf::GgufWriter w;
  synth_detail::write_header(o, w);

  // Weights keep the residual stream at unit scale: each matrix has variance 1/cols.
  Rng rng(o.seed);
  TensorStore store{{}, w};
  const int64_t head_dim = o.n_embd / o.n_head;
  const int64_t kv_dim = o.n_head_kv * head_dim;
  const float v_embd = 1.0f / static_cast<float>(o.n_embd);
  store.add_matrix("token_embd.weight", o.n_vocab, o.n_embd, 1.0f, o.type, rng);
  store.add_ones("output_norm.weight", o.n_embd);
  store.add_matrix("output.weight", o.n_vocab, o.n_embd, v_embd, o.type, rng);
  for (int64_t i = 0; i < o.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    store.add_attention(p, o.n_embd, kv_dim, o.type, rng, [](int64_t) { return false; });
    store.add_ones(p + "ffn_norm.weight", o.n_embd);
    store.add_matrix(p + "ffn_gate.weight", o.n_ff, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "ffn_up.weight", o.n_ff, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "ffn_down.weight", o.n_embd, o.n_ff, 1.0f / static_cast<float>(o.n_ff), o.type, rng);
  }
  w.write(path);
}

}  // namespace hearth
