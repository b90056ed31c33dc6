// Tiny falcon, opt, qwen2, qwen3, gemma2, gemma3 and phi3 models for the architecture tests: random weights (F32, or Q8_0 where the
// rows allow), written as GGUF files (plain or PowerInfer's PWRI layout), and a reference forward
// pass that transcribes each architecture as plain loops in double precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/dtype.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "model/synth_vocab.h"

namespace hearth::arch_test {

constexpr int64_t kEmbd = 64;
constexpr int64_t kLayers = 2;
constexpr int64_t kFf = 256;
constexpr int64_t kHead = 4;
constexpr int64_t kHeadDim = kEmbd / kHead;
constexpr int64_t kVocab = 300;
constexpr int64_t kOptPositions = 2050;  // 2048 positions + OPT's offset of 2
constexpr int64_t kOptOffset = 2;
constexpr float kEps = 1e-5f;
constexpr uint32_t kGgmlF32 = 0;

struct Tensor {
  std::vector<int64_t> ne;  // ggml order: ne[0] contiguous
  std::vector<float> data;  // the values (of the quantized bytes, when quantized)
  DType type = DType::F32;
  std::vector<uint8_t> quantized;
};

// The tensors and options of one tiny model; write() makes the GGUF file.
struct TinyModel {
  std::string arch;
  int64_t n_head_kv = kHead;
  bool pwri = false;    // magic PWRI, ffn_down_t instead of ffn_down, predictors
  bool norm_2 = false;  // falcon-40B's attn_norm_2
  std::string act;      // hearth.ffn_activation when not empty
  std::string layout;   // falcon.tensor_data_layout when not empty
  int64_t window = 0;   // {arch}.attention.sliding_window when not 0
  int64_t head_dim = kHeadDim;  // {arch}.attention.key_length when not kHeadDim
  int64_t n_layer = kLayers;
  int64_t swa_pattern = 0;      // the architecture's (not in the file): which layers slide
  double rope_base_swa = 0.0;   // and the sliding layers' RoPE base (0: the model's)
  double rope_base = 10000.0;   // {arch}.rope.freq_base when not 10000
  double rope_linear = 1.0;     // rope.scaling.type linear with this factor when not 1
  float attn_softcap = 0.0f;    // {arch}.attn_logit_softcapping when not 0
  float final_softcap = 0.0f;   // {arch}.final_logit_softcapping when not 0
  // More metadata: {arch}.KEY = value (integers, floats and strings).
  std::map<std::string, uint32_t> u32_keys;
  std::map<std::string, float> f32_keys;
  std::map<std::string, std::string> string_keys;
  std::vector<std::string> order;
  std::map<std::string, Tensor> tensors;
  std::mt19937 rng{7};

  int64_t q_dim() const { return kHead * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }

  std::vector<float> random(size_t n, float scale, float offset = 0.0f) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = offset + scale * u(rng);
    return v;
  }
  void add(const std::string& name, std::vector<int64_t> ne, float scale, float offset = 0.0f) {
    size_t n = 1;
    for (int64_t d : ne) n *= static_cast<size_t>(d);
    order.push_back(name);
    tensors[name] = Tensor{std::move(ne), random(n, scale, offset), DType::F32, {}};
  }
  // y = W x for W of ne {in, out}.
  void add_linear(const std::string& name, int64_t in, int64_t out, float gain = 1.0f) {
    add(name, {in, out}, gain / std::sqrt(static_cast<float>(in)));
  }
  void add_norm(const std::string& name) {
    add(name + ".weight", {kEmbd}, 0.1f, 1.0f);
    add(name + ".bias", {kEmbd}, 0.1f);
  }
  void add_rms_norm(const std::string& name) { add(name + ".weight", {kEmbd}, 0.1f, 1.0f); }
  // The token embeddings, the final norm (RMS or Layer) and, unless the output is tied to the
  // embeddings, a separate output matrix.
  void add_ends(bool rms_norm, bool tied = false) {
    add("token_embd.weight", {kEmbd, kVocab}, 1.0f);
    if (rms_norm) {
      add_rms_norm("output_norm");
    } else {
      add_norm("output_norm");
    }
    if (!tied) add_linear("output.weight", kEmbd, kVocab, 2.0f);
  }
  bool gemma() const { return arch == "gemma" || arch == "gemma2" || arch == "gemma3"; }
  bool rms() const {
    return arch == "llama" || arch == "qwen2" || arch == "qwen3" || gemma() || arch == "phi3";
  }
  // A pre-norm RMSNorm layer with separate q/k/v (no biases) and a gated FFN, with per-head q/k
  // norms (qwen3) or norms after each half (gemma2) where asked.
  void add_gated_layers(bool head_norms, bool post_norms) {
    for (int64_t il = 0; il < n_layer; ++il) add_gated_layer(il, head_norms, post_norms);
  }
  void add_gated_layer(int64_t il, bool head_norms, bool post_norms) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add_rms_norm(p + "attn_norm");
    add_linear(p + "attn_q.weight", kEmbd, q_dim(), 3.0f);
    add_linear(p + "attn_k.weight", kEmbd, kv_dim(), 3.0f);
    add_linear(p + "attn_v.weight", kEmbd, kv_dim(), 3.0f);
    if (head_norms) {
      add(p + "attn_q_norm.weight", {head_dim}, 0.5f, 1.0f);
      add(p + "attn_k_norm.weight", {head_dim}, 0.5f, 1.0f);
    }
    add_linear(p + "attn_output.weight", q_dim(), kEmbd);
    if (post_norms) add_rms_norm(p + "post_attention_norm");
    add_rms_norm(p + "ffn_norm");
    add_linear(p + "ffn_gate.weight", kEmbd, kFf, 2.0f);
    add_linear(p + "ffn_up.weight", kEmbd, kFf, 2.0f);
    add_down(p + "ffn_down", false);
    if (post_norms) add_rms_norm(p + "post_ffw_norm");
  }
  // ffn_down {n_ff, n_embd}, or PowerInfer's transposed ffn_down_t {n_embd, n_ff}.
  void add_down(const std::string& name, bool transposed) {
    add(name + ".weight", transposed ? std::vector<int64_t>{kEmbd, kFf} : std::vector<int64_t>{kFf, kEmbd},
        1.0f / std::sqrt(static_cast<float>(kFf)));
  }
  void add_predictor(int64_t il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t hidden = 16 + 24 * il;  // a different width in every layer
    add_linear(p + "fc1.weight", kEmbd, hidden);
    add_linear(p + "fc2.weight", hidden, kFf);
  }

  void drop(const std::string& name) {
    ASSERT_EQ(tensors.erase(name), 1u) << name;
    order.erase(std::find(order.begin(), order.end(), name));
  }
  void reshape(const std::string& name, std::vector<int64_t> ne) {
    Tensor& t = tensors.at(name);
    size_t n = 1;
    for (int64_t d : ne) n *= static_cast<size_t>(d);
    t.ne = std::move(ne);
    t.data.resize(n, 0.25f);
  }

  // Stores every matrix whose rows allow it as `type`; the reference then reads the values the
  // file really holds.
  void quantize(DType type) {
    for (auto& [name, t] : tensors) {
      if (t.ne.size() != 2 || t.ne[0] % dtype_block_size(type) != 0) continue;
      t.type = type;
      t.quantized.resize(static_cast<size_t>(t.ne[1] * row_bytes(type, t.ne[0])));
      quantize_rows(type, t.data.data(), t.quantized.data(), t.ne[1], t.ne[0]);
      for (int64_t r = 0; r < t.ne[1]; ++r) {
        dequantize_row(type, t.quantized.data() + r * row_bytes(type, t.ne[0]),
                       t.data.data() + r * t.ne[0], t.ne[0]);
      }
    }
  }

  const Tensor* find(const std::string& name) const {
    const auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
  const Tensor& at(const std::string& name) const { return tensors.at(name); }

  std::string write(const std::string& file_name) const {
    gguf::GgufWriter w;
    w.set_string("general.architecture", arch);
    w.set_string("general.name", "tiny " + arch);
    const std::string a = arch + ".";
    w.set_u32(a + "context_length", arch == "opt" ? kOptPositions : 2048);
    w.set_u32(a + "embedding_length", kEmbd);
    w.set_u32(a + "block_count", static_cast<uint32_t>(n_layer));
    w.set_u32(a + "feed_forward_length", kFf);
    w.set_u32(a + "attention.head_count", kHead);
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
    w.set_f32(a + (rms() ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon"),
              kEps);
    if (window) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(window));
    if (head_dim != kHeadDim) w.set_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
    if (attn_softcap > 0) w.set_f32(a + "attn_logit_softcapping", attn_softcap);
    if (rope_base != 10000.0) w.set_f32(a + "rope.freq_base", static_cast<float>(rope_base));
    if (rope_linear != 1.0) {
      w.set_string(a + "rope.scaling.type", "linear");
      w.set_f32(a + "rope.scaling.factor", static_cast<float>(rope_linear));
    }
    if (final_softcap > 0) w.set_f32(a + "final_logit_softcapping", final_softcap);
    if (!layout.empty()) w.set_string(a + "tensor_data_layout", layout);
    if (!act.empty()) w.set_string("hearth.ffn_activation", act);
    for (const auto& [key, v] : u32_keys) w.set_u32(a + key, v);
    for (const auto& [key, v] : f32_keys) w.set_f32(a + key, v);
    for (const auto& [key, v] : string_keys) w.set_string(a + key, v);
    const SynthVocab vocab = make_synth_vocab(kVocab);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
    w.set_f32_array("tokenizer.ggml.scores", vocab.scores);
    w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_magic_powerinfer(pwri);
    for (const std::string& name : order) {
      const Tensor& t = tensors.at(name);
      if (t.type == DType::F32) {
        w.add_tensor(name, kGgmlF32, t.ne, t.data.data(), t.data.size() * sizeof(float));
      } else {
        w.add_tensor(name, static_cast<uint32_t>(t.type), t.ne, t.quantized.data(),
                     t.quantized.size());
      }
    }
    const std::string path = test::temp_dir() + "/" + file_name;
    w.write(path);
    return path;
  }
};

// Falcon-7B's shape (multi-query: n_head_kv = 1) or, with norm_2, Falcon-40B's.
inline TinyModel make_falcon(bool pwri, bool norm_2, int64_t n_head_kv) {
  TinyModel m;
  m.arch = "falcon";
  m.pwri = pwri;
  m.norm_2 = norm_2;
  m.n_head_kv = n_head_kv;
  m.layout = "jploski";
  m.add_ends(false);
  for (int64_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    m.add_norm(p + "attn_norm");
    if (norm_2) m.add_norm(p + "attn_norm_2");
    m.add_linear(p + "attn_qkv.weight", kEmbd, kEmbd + 2 * m.kv_dim(), 3.0f);
    m.add_linear(p + "attn_output.weight", kEmbd, kEmbd);
    m.add_linear(p + "ffn_up.weight", kEmbd, kFf, 2.0f);
    m.add_down(p + (pwri ? "ffn_down_t" : "ffn_down"), pwri);
    if (pwri) m.add_predictor(il);
  }
  return m;
}

// Pre-LayerNorm OPT (1.3B and larger) with biases everywhere and tied output.
inline TinyModel make_opt(bool pwri) {
  TinyModel m;
  m.arch = "opt";
  m.pwri = pwri;
  m.add("token_embd.weight", {kEmbd, kVocab}, 1.0f);
  m.add("position_embd.weight", {kEmbd, kOptPositions}, 0.5f);
  m.add_norm("output_norm");
  for (int64_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    m.add_norm(p + "attn_norm");
    for (const char* qkv : {"attn_q", "attn_k", "attn_v"}) {
      m.add_linear(p + qkv + ".weight", kEmbd, kEmbd, 3.0f);
      m.add(p + qkv + ".bias", {kEmbd}, 0.2f);
    }
    m.add_linear(p + "attn_output.weight", kEmbd, kEmbd);
    m.add(p + "attn_output.bias", {kEmbd}, 0.1f);
    m.add_norm(p + "ffn_norm");
    m.add_linear(p + "ffn_up.weight", kEmbd, kFf, 2.0f);
    m.add(p + "ffn_up.bias", {kFf}, 0.3f, -0.1f);
    const std::string down = p + (pwri ? "ffn_down_t" : "ffn_down");
    m.add_down(down, pwri);
    m.add(down + ".bias", {kEmbd}, 0.1f);
    if (pwri) m.add_predictor(il);
  }
  return m;
}

// Qwen2: the Llama block with q/k/v biases and NeoX RoPE, SwiGLU.
inline TinyModel make_qwen2() {
  TinyModel m;
  m.arch = "qwen2";
  m.n_head_kv = 2;
  m.add_ends(true);
  for (int64_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    m.add_rms_norm(p + "attn_norm");
    for (const char* qkv : {"attn_q", "attn_k", "attn_v"}) {
      const int64_t rows = qkv[5] == 'q' ? kEmbd : m.kv_dim();
      m.add_linear(p + qkv + ".weight", kEmbd, rows, 3.0f);
      m.add(p + qkv + ".bias", {rows}, 0.2f);
    }
    m.add_linear(p + "attn_output.weight", kEmbd, kEmbd);
    m.add_rms_norm(p + "ffn_norm");
    m.add_linear(p + "ffn_gate.weight", kEmbd, kFf, 2.0f);
    m.add_linear(p + "ffn_up.weight", kEmbd, kFf, 2.0f);
    m.add_down(p + "ffn_down", false);
  }
  return m;
}

// Qwen3: no q/k/v biases, an RMSNorm of every head's q and k before NeoX RoPE, and (as
// Qwen3-0.6B) heads wider than n_embd / n_head: q_dim 128 against n_embd 64.
inline TinyModel make_qwen3() {
  TinyModel m;
  m.arch = "qwen3";
  m.n_head_kv = 2;
  m.head_dim = 2 * kHeadDim;
  m.add_ends(true);
  m.add_gated_layers(/*head_norms=*/true, false);
  return m;
}

// Llama with heads narrower than n_embd / n_head (Mistral-Nemo's 32 heads of 128 in 5120):
// attention.key_length sets them, q_dim 32 against n_embd 64.
inline TinyModel make_llama_narrow_heads() {
  TinyModel m;
  m.arch = "llama";
  m.n_head_kv = 2;
  m.head_dim = kHeadDim / 2;
  m.add_ends(true);
  m.add_gated_layers(false, false);
  return m;
}

// Gemma (1): the Llama block with embeddings times sqrt(n_embd), NeoX RoPE, a GELU-gated FFN,
// output tied to the embeddings, and (as Gemma-7B's 16 heads of 256 in 3072) heads wider than
// n_embd / n_head.
inline TinyModel make_gemma() {
  TinyModel m;
  m.arch = "gemma";
  m.head_dim = 2 * kHeadDim;
  m.add_ends(true, /*tied=*/true);
  m.add_gated_layers(false, false);
  return m;
}

// Gemma 2: embeddings times sqrt(n_embd), a norm after each half as well as before it, a
// GELU-gated FFN, soft-capped scores and logits, a sliding window on the even layers, heads wider
// than n_embd / n_head, output tied to the embeddings. The caps are low enough to bite here.
inline TinyModel make_gemma2() {
  TinyModel m;
  m.arch = "gemma2";
  m.n_head_kv = 2;
  m.head_dim = 2 * kHeadDim;
  m.window = 3;
  m.swa_pattern = 2;
  m.attn_softcap = 3.0f;
  m.final_softcap = 2.0f;
  m.add_ends(true, /*tied=*/true);
  m.add_gated_layers(false, /*post_norms=*/true);
  return m;
}

// Gemma 3: Gemma 2's block with per-head q/k norms and no soft-caps; layers 0-4 of every 6 slide,
// with RoPE base 10000, and the sixth sees the whole context with the model's base and linear
// scaling (here base 1000, factor 2, so that the two RoPEs differ within a short prompt).
inline TinyModel make_gemma3() {
  TinyModel m;
  m.arch = "gemma3";
  m.n_layer = 6;
  m.n_head_kv = 2;
  m.head_dim = 2 * kHeadDim;
  m.window = 3;
  m.swa_pattern = 6;
  m.rope_base_swa = 10000.0;
  m.rope_base = 1000.0;
  m.rope_linear = 2.0;
  m.add_ends(true, /*tied=*/true);
  m.add_gated_layers(/*head_norms=*/true, /*post_norms=*/true);
  return m;
}

// Phi-3: fused QKV and fused gate|up (gate rows first), NeoX RoPE, a sliding window.
inline TinyModel make_phi3(int64_t window) {
  TinyModel m;
  m.arch = "phi3";
  m.window = window;
  m.add_ends(true);
  for (int64_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    m.add_rms_norm(p + "attn_norm");
    m.add_linear(p + "attn_qkv.weight", kEmbd, kEmbd + 2 * m.kv_dim(), 3.0f);
    m.add_linear(p + "attn_output.weight", kEmbd, kEmbd);
    m.add_rms_norm(p + "ffn_norm");
    m.add_linear(p + "ffn_up.weight", kEmbd, 2 * kFf, 2.0f);
    m.add_down(p + "ffn_down", false);
  }
  return m;
}

// ---- The reference: each architecture transcribed as plain loops in double precision. ----

using Vec = std::vector<double>;

// y = W x for W of ne {cols, rows}
inline Vec linear(const Tensor& w, const Vec& x) {
  const int64_t cols = w.ne[0], rows = w.ne[1];
  EXPECT_EQ(cols, static_cast<int64_t>(x.size()));
  Vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r] += double(w.data[r * cols + c]) * x[c];
  }
  return y;
}

inline void add(Vec& y, const Vec& x) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += x[i];
}
inline void add(Vec& y, const Tensor& bias) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += bias.data[i];
}

inline Vec layer_norm(const Vec& x, const TinyModel& m, const std::string& name) {
  const Tensor& w = m.at(name + ".weight");
  const Tensor& b = m.at(name + ".bias");
  double mean = 0.0, var = 0.0;
  for (double v : x) mean += v;
  mean /= double(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= double(x.size());
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + kEps) * w.data[i] + b.data[i];
  return y;
}

inline Vec rms_norm(const Vec& x, const TinyModel& m, const std::string& name) {
  const Tensor& w = m.at(name + ".weight");
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / double(x.size()) + kEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w.data[i];
  return y;
}

// RMSNorm of every head_dim-wide slice of x with one shared weight (Qwen3's q and k norms).
inline void rms_norm_heads(Vec& x, const Tensor& w, int64_t head_dim) {
  for (size_t h = 0; h + size_t(head_dim) <= x.size(); h += size_t(head_dim)) {
    double ss = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) ss += x[h + d] * x[h + d];
    const double scale = 1.0 / std::sqrt(ss / double(head_dim) + kEps);
    for (int64_t d = 0; d < head_dim; ++d) x[h + d] *= scale * w.data[d];
  }
}

inline Vec row(const Tensor& t, int64_t r) {
  return Vec(t.data.begin() + r * t.ne[0], t.data.begin() + (r + 1) * t.ne[0]);
}

inline double act(const std::string& name, double x) {
  if (name == "relu") return std::max(x, 0.0);
  if (name == "silu") return x / (1.0 + std::exp(-x));
  // gelu, tanh form (ggml's)
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// The reference's RoPE: frequency divisors per pair (LongRoPE's factors; null: none) and a
// scale on cos and sin (rope.scaling.attn_factor).
struct RopeScaling {
  const std::vector<float>* divisors = nullptr;
  double mscale = 1.0;
  double base = 10000.0;
  double freq_scale = 1.0;  // linear scaling: positions times this
};

// Rotary embedding of every head of x at position pos: pairs (i, i + head_dim / 2) (NeoX), or
// adjacent pairs (2i, 2i + 1) (`normal`, Llama's).
inline void rope_neox(Vec& x, int64_t n_heads, int64_t pos, const RopeScaling& rs = {},
                      int64_t head_dim = kHeadDim, bool normal = false) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* v = x.data() + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      double theta =
          rs.freq_scale * double(pos) * std::pow(rs.base, -2.0 * double(i) / double(head_dim));
      if (rs.divisors) theta /= (*rs.divisors)[static_cast<size_t>(i)];
      const double c = rs.mscale * std::cos(theta), s = rs.mscale * std::sin(theta);
      double& a = normal ? v[2 * i] : v[i];
      double& b = normal ? v[2 * i + 1] : v[i + half];
      const double x0 = a, x1 = b;
      a = x0 * c - x1 * s;
      b = x0 * s + x1 * c;
    }
  }
}

class Reference {
 public:
  // predict: keep only the neurons whose predictor score fc2 · relu(fc1 · p) is >= 0.
  Reference(const TinyModel& m, std::string activation, bool predict = false,
            RopeScaling rope = {})
      : m_(m),
        act_(std::move(activation)),
        predict_(predict),
        rope_(rope),
        k_(m.n_layer),
        v_(m.n_layer) {}

  // The logits after `token` at the next position.
  Vec step(int32_t token) {
    const int64_t pos = pos_++;
    Vec x = row(m_.at("token_embd.weight"), token);
    if (m_.gemma()) {
      for (double& e : x) e *= std::sqrt(double(kEmbd));
    }
    if (m_.arch == "opt") add(x, row(m_.at("position_embd.weight"), pos + kOptOffset));
    for (int64_t il = 0; il < m_.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      if (m_.rms()) {
        llama_like_layer(il, p, pos, x);
      } else if (m_.arch == "falcon") {
        const Vec h = layer_norm(x, m_, p + "attn_norm");
        const Vec a = m_.norm_2 ? layer_norm(x, m_, p + "attn_norm_2") : h;
        const Vec qkv = linear(m_.at(p + "attn_qkv.weight"), a);
        Vec q(qkv.begin(), qkv.begin() + kEmbd);
        Vec k(qkv.begin() + kEmbd, qkv.begin() + kEmbd + m_.kv_dim());
        Vec v(qkv.begin() + kEmbd + m_.kv_dim(), qkv.end());
        rope_neox(q, kHead, pos);
        rope_neox(k, m_.n_head_kv, pos);
        const Vec att = linear(m_.at(p + "attn_output.weight"), attend(il, q, k, v));
        const Vec f = ffn(p, h, x);  // predicted from the layer input
        for (size_t i = 0; i < x.size(); ++i) x[i] += att[i] + f[i];
      } else {
        const Vec h = layer_norm(x, m_, p + "attn_norm");
        Vec q = linear(m_.at(p + "attn_q.weight"), h);
        add(q, m_.at(p + "attn_q.bias"));
        Vec k = linear(m_.at(p + "attn_k.weight"), h);
        add(k, m_.at(p + "attn_k.bias"));
        Vec v = linear(m_.at(p + "attn_v.weight"), h);
        add(v, m_.at(p + "attn_v.bias"));
        Vec att = linear(m_.at(p + "attn_output.weight"), attend(il, q, k, v));
        add(att, m_.at(p + "attn_output.bias"));
        add(x, att);
        add(x, ffn(p, layer_norm(x, m_, p + "ffn_norm"), x));
      }
    }
    const Vec h = m_.rms() ? rms_norm(x, m_, "output_norm") : layer_norm(x, m_, "output_norm");
    const Tensor* out = m_.find("output.weight");
    Vec logits = linear(out ? *out : m_.at("token_embd.weight"), h);
    if (m_.final_softcap > 0) {
      for (double& e : logits) e = m_.final_softcap * std::tanh(e / m_.final_softcap);
    }
    return logits;
  }

 private:
  // Qwen2, Qwen3 and Phi-3: RMSNorm, attention then a gated SiLU FFN (the caller's activation).
  void llama_like_layer(int64_t il, const std::string& p, int64_t pos, Vec& x) {
    const Vec h = rms_norm(x, m_, p + "attn_norm");
    Vec q, k, v;
    if (const Tensor* qkv_w = m_.find(p + "attn_qkv.weight")) {
      const Vec qkv = linear(*qkv_w, h);
      q.assign(qkv.begin(), qkv.begin() + kEmbd);
      k.assign(qkv.begin() + kEmbd, qkv.begin() + kEmbd + m_.kv_dim());
      v.assign(qkv.begin() + kEmbd + m_.kv_dim(), qkv.end());
    } else {
      q = linear(m_.at(p + "attn_q.weight"), h);
      k = linear(m_.at(p + "attn_k.weight"), h);
      v = linear(m_.at(p + "attn_v.weight"), h);
      if (const Tensor* b = m_.find(p + "attn_q.bias")) add(q, *b);
      if (const Tensor* b = m_.find(p + "attn_k.bias")) add(k, *b);
      if (const Tensor* b = m_.find(p + "attn_v.bias")) add(v, *b);
    }
    if (const Tensor* w = m_.find(p + "attn_q_norm.weight")) rms_norm_heads(q, *w, m_.head_dim);
    if (const Tensor* w = m_.find(p + "attn_k_norm.weight")) rms_norm_heads(k, *w, m_.head_dim);
    RopeScaling rope = rope_;
    rope.base = m_.rope_base;
    rope.freq_scale = 1.0 / m_.rope_linear;
    if (m_.rope_base_swa > 0 && slides(il)) rope = RopeScaling{.base = m_.rope_base_swa};
    const bool normal = m_.arch == "llama";
    rope_neox(q, kHead, pos, rope, m_.head_dim, normal);
    rope_neox(k, m_.n_head_kv, pos, rope, m_.head_dim, normal);
    Vec a = linear(m_.at(p + "attn_output.weight"), attend(il, q, k, v));
    if (m_.find(p + "post_attention_norm.weight")) a = rms_norm(a, m_, p + "post_attention_norm");
    add(x, a);
    const Vec f = rms_norm(x, m_, p + "ffn_norm");
    Vec g, u;
    if (m_.find(p + "ffn_gate.weight")) {
      g = linear(m_.at(p + "ffn_gate.weight"), f);
      u = linear(m_.at(p + "ffn_up.weight"), f);
    } else {
      const Vec gu = linear(m_.at(p + "ffn_up.weight"), f);
      g.assign(gu.begin(), gu.begin() + kFf);
      u.assign(gu.begin() + kFf, gu.end());
    }
    for (int64_t i = 0; i < kFf; ++i) u[i] *= act(act_, g[i]);
    Vec y = linear(m_.at(p + "ffn_down.weight"), u);
    if (m_.find(p + "post_ffw_norm.weight")) y = rms_norm(y, m_, p + "post_ffw_norm");
    add(x, y);
  }

  bool slides(int64_t il) const {
    return m_.window > 0 && (m_.swa_pattern == 0 || il % m_.swa_pattern < m_.swa_pattern - 1);
  }

  Vec attend(int64_t il, const Vec& q, const Vec& k, const Vec& v) {
    k_[il].push_back(k);
    v_[il].push_back(v);
    const int64_t group = kHead / m_.n_head_kv;
    const size_t n = k_[il].size();
    // A sliding window shows each query its last `window` positions only (on the layers the
    // architecture's pattern picks).
    const size_t lo = slides(il) && m_.window > 0 && n > size_t(m_.window) ? n - size_t(m_.window) : 0;
    const int64_t hd = m_.head_dim;
    Vec out(size_t(m_.q_dim()), 0.0);
    for (int64_t h = 0; h < kHead; ++h) {
      const int64_t kvh = h / group;
      Vec s(n, 0.0);
      double max = -1e300;
      for (size_t j = lo; j < n; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < hd; ++d) dot += q[h * hd + d] * k_[il][j][kvh * hd + d];
        s[j] = dot / std::sqrt(double(hd));
        if (m_.attn_softcap > 0) s[j] = m_.attn_softcap * std::tanh(s[j] / m_.attn_softcap);
        max = std::max(max, s[j]);
      }
      double sum = 0.0;
      for (size_t j = lo; j < n; ++j) sum += (s[j] = std::exp(s[j] - max));
      for (size_t j = lo; j < n; ++j) {
        for (int64_t d = 0; d < hd; ++d) {
          out[h * hd + d] += s[j] / sum * v_[il][j][kvh * hd + d];
        }
      }
    }
    return out;
  }

  Vec ffn(const std::string& p, const Vec& h, const Vec& pred_in) {
    Vec a = linear(m_.at(p + "ffn_up.weight"), h);
    if (const Tensor* b = m_.find(p + "ffn_up.bias")) add(a, *b);
    for (double& e : a) e = act(act_, e);
    if (predict_) {
      Vec hidden = linear(m_.at(p + "fc1.weight"), pred_in);
      for (double& e : hidden) e = std::max(e, 0.0);
      const Vec score = linear(m_.at(p + "fc2.weight"), hidden);
      for (int64_t i = 0; i < kFf; ++i) {
        if (score[i] < 0.0) a[i] = 0.0;
      }
    }
    Vec y(kEmbd, 0.0);
    if (const Tensor* down = m_.find(p + "ffn_down.weight")) {
      y = linear(*down, a);
      if (const Tensor* b = m_.find(p + "ffn_down.bias")) add(y, *b);
    } else {
      const Tensor& dt = m_.at(p + "ffn_down_t.weight");  // row i: neuron i's output column
      for (int64_t i = 0; i < kFf; ++i) {
        for (int64_t e = 0; e < kEmbd; ++e) y[e] += a[i] * dt.data[i * kEmbd + e];
      }
      if (const Tensor* b = m_.find(p + "ffn_down_t.bias")) add(y, *b);
    }
    return y;
  }

  const TinyModel& m_;
  std::string act_;
  bool predict_;
  RopeScaling rope_;
  int64_t pos_ = 0;
  std::vector<std::vector<Vec>> k_, v_;  // per layer, per position
};

}  // namespace hearth::arch_test
