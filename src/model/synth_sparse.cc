// Sparse synthetic models: Llama-shaped ReGLU models whose FFN neurons fire with a power-law
// frequency at a requested average sparsity, with predictors that find the active neurons.
//
// Llama FFNs have no bias, so a neuron's firing rate has to come from its input
// (../shared/DESIGN.md section 6). The construction, in the residual stream p of every layer:
//   - coordinate 0 holds the same constant a in every token's embedding;
//   - r "feature" coordinates, starting at the weight type's next block (so that coordinate 0 has
//     a quantization block to itself), hold independent N(0, 1) values (clipped) that differ from
//     token to token;
//   - no layer writes to these coordinates (SparseLayout::frozen: the rows of attn_output and
//     ffn_down that would are zero, which every type stores exactly), so p keeps them exactly as
//     embedded, at every layer. Which neurons fire therefore depends on the current token only,
//     not on its context (each layer draws its own gate rows, so layers differ);
//   - gate row i is -c_i at coordinate 0 and a random w_i on the features, zero elsewhere, so
//     gate_i · norm(p) > 0  <=>  w_i · features > c_i * a (rms_norm only scales p by a positive
//     factor, and ffn_norm is all ones). With the features' mean and variance measured on the
//     stored embedding, c_i follows from neuron i's target frequency through the normal quantile.
//   - Frequencies follow a power law over neuron rank (synth_firing_frequencies), and ranks are
//     shuffled per layer, so hot neurons are scattered as in real models.
// The predictor is exact by construction: it needs the gate's score as a linear function of p,
// restricted to coordinate 0 and the features, from fc2 · relu(fc1 · p). fc1 row 0 reads p_0 = a
// (positive), and row 1 + j reads p_j + kappa * p_0, which kappa makes positive for every token, so
// relu is the identity on both; fc2 row i then recombines them into the dequantized gate row's
// exact score (plus a small margin toward "active", for the rounding of activations the runtime
// does before its quantized dot products). Its width is H = r + 1.
// The rest of the model (attention, up, down, the free coordinates) is random as in dense models.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "model/synth_internal.h"

namespace hearth::synth_detail {
namespace {

constexpr float kConstant = 4.0f;     // a, coordinate 0 of every embedding (exact in every type)
constexpr double kFeatureClip = 3.5;  // features are N(0, 1) clipped to +-kFeatureClip
// Predictor bias toward "active", in standard deviations of the neuron's gate score over tokens.
constexpr double kMargin = 0.01;

// Inverse of the standard normal CDF (P. J. Acklam's rational approximation, relative error
// below 1.2e-9), for p in (0, 1).
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - lo) return -normal_quantile(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// What the stored embedding holds on the construction's coordinates.
struct FeatureStats {
  float a = 0.0f;            // coordinate 0, identical in every row
  std::vector<double> mean;  // per feature, over the vocabulary
  std::vector<double> var;
  double max_abs = 0.0;  // largest |feature| of any token
};

FeatureStats add_embedding(TensorStore& store, const SynthOptions& o, const SparseLayout& l,
                           Rng& rng) {
  const int64_t d = o.n_embd, r = l.features;
  const float u = std::sqrt(3.0f);  // free coordinates: uniform with variance 1, as dense models
  std::vector<float> row(static_cast<size_t>(d)), back(static_cast<size_t>(d));
  std::vector<double> sum(static_cast<size_t>(r)), sum2(static_cast<size_t>(r));
  FeatureStats s;
  const int64_t rb = row_bytes(o.type, d);
  uint8_t* data = store.add("token_embd.weight", o.n_vocab, d, o.type);
  for (int64_t t = 0; t < o.n_vocab; ++t) {
    for (int64_t k = 0; k < d; ++k) {
      if (k == 0) {
        row[k] = kConstant;
      } else if (k < l.first_feature) {
        row[k] = 0.0f;
      } else if (k < l.frozen) {
        row[k] = static_cast<float>(std::clamp(rng.gaussian(), -kFeatureClip, kFeatureClip));
      } else {
        row[k] = u * rng.symmetric();
      }
    }
    quantize_row(o.type, row.data(), data + t * rb, d);
    dequantize_row(o.type, data + t * rb, back.data(), d);
    if (t == 0) s.a = back[0];
    if (back[0] != s.a) fail("synth: internal error: the embedding's constant coordinate varies");
    for (int64_t j = 0; j < r; ++j) {
      const double x = back[static_cast<size_t>(l.first_feature + j)];
      sum[j] += x;
      sum2[j] += x * x;
      s.max_abs = std::max(s.max_abs, std::fabs(x));
    }
  }
  const double n = static_cast<double>(o.n_vocab);
  s.mean.resize(static_cast<size_t>(r));
  s.var.resize(static_cast<size_t>(r));
  for (int64_t j = 0; j < r; ++j) {
    s.mean[j] = sum[j] / n;
    s.var[j] = std::max(0.0, sum2[j] / n - s.mean[j] * s.mean[j]);
  }
  return s;
}

// One layer's gate rows as stored (dequantized) on the coordinates the predictor reads.
struct GateRows {
  std::vector<float> g0;        // [n_ff]            value at coordinate 0
  std::vector<float> features;  // [n_ff, features]  values on the features
  std::vector<float> sd;        // [n_ff]            std of the score over tokens (in units of p)
};

GateRows add_gate(TensorStore& store, const std::string& name, const SynthOptions& o,
                  const SparseLayout& l, const FeatureStats& fs,
                  const std::vector<double>& freq_by_rank, Rng& rng) {
  const int64_t d = o.n_embd, r = l.features, n_ff = o.n_ff;
  // Neuron i has rank rank[i]: a shuffle, so the hot neurons are scattered.
  std::vector<int64_t> rank(static_cast<size_t>(n_ff));
  std::iota(rank.begin(), rank.end(), 0);
  for (int64_t i = n_ff - 1; i > 0; --i) {
    std::swap(rank[i], rank[rng.below(static_cast<uint64_t>(i + 1))]);
  }
  GateRows g;
  g.g0.resize(static_cast<size_t>(n_ff));
  g.features.resize(static_cast<size_t>(n_ff * r));
  g.sd.resize(static_cast<size_t>(n_ff));
  std::vector<float> row(static_cast<size_t>(d), 0.0f), back(static_cast<size_t>(d));
  const int64_t rb = row_bytes(o.type, d);
  uint8_t* data = store.add(name, n_ff, d, o.type);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(r));
  for (int64_t i = 0; i < n_ff; ++i) {
    uint8_t* dst = data + i * rb;
    // The features' weights first, as stored: coordinate 0 has a block (or element) of its own, so
    // its value below does not change how they round.
    row[0] = 0.0f;
    for (int64_t j = 0; j < r; ++j)
      row[l.first_feature + j] = w_scale * static_cast<float>(rng.gaussian());
    quantize_row(o.type, row.data(), dst, d);
    dequantize_row(o.type, dst, back.data(), d);
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < r; ++j) {
      const double w = back[l.first_feature + j];
      mean += w * fs.mean[j];
      var += w * w * fs.var[j];
    }
    const double sd = std::sqrt(var);
    // P(w . features - c a > 0) = f  for  w . features ~ N(mean, sd^2).
    const double f = freq_by_rank[static_cast<size_t>(rank[i])];
    const double c = sd > 0 ? (mean - sd * normal_quantile(f)) / fs.a : 1.0;
    row[0] = static_cast<float>(-c);
    quantize_row(o.type, row.data(), dst, d);
    dequantize_row(o.type, dst, back.data(), d);
    g.g0[i] = back[0];
    for (int64_t j = 0; j < r; ++j) g.features[i * r + j] = back[l.first_feature + j];
    g.sd[i] = static_cast<float>(sd);
  }
  return g;
}

// fc1 [H, n_embd] and fc2 [n_ff, H] (see the comment at the top).
void add_predictor(TensorStore& store, const std::string& prefix, const SynthOptions& o,
                   const SparseLayout& l, const FeatureStats& fs, const GateRows& g) {
  const DType pt = o.type == DType::F32 ? DType::F32 : DType::F16;
  const int64_t d = o.n_embd, r = l.features, h = l.width;
  // kappa: a power of two (exact in f16) with kappa * a above every |feature|.
  const double kappa = std::exp2(std::ceil(std::log2(std::max(fs.max_abs, 1e-3) * 1.01 / fs.a)));
  std::vector<float> row(static_cast<size_t>(std::max(d, h))), back(row.size());

  uint8_t* fc1 = store.add(prefix + "fc1.weight", h, d, pt);
  const int64_t rb1 = row_bytes(pt, d);
  for (int64_t k = 0; k < h; ++k) {
    std::fill(row.begin(), row.begin() + d, 0.0f);
    row[0] = k == 0 ? 1.0f : static_cast<float>(kappa);
    if (k > 0) row[l.first_feature + k - 1] = 1.0f;
    quantize_row(pt, row.data(), fc1 + k * rb1, d);
  }

  uint8_t* fc2 = store.add(prefix + "fc2.weight", o.n_ff, h, pt);
  const int64_t rb2 = row_bytes(pt, h);
  for (int64_t i = 0; i < o.n_ff; ++i) {
    uint8_t* dst = fc2 + i * rb2;
    row[0] = 0.0f;
    for (int64_t j = 0; j < r; ++j) row[1 + j] = g.features[i * r + j];
    quantize_row(pt, row.data(), dst, h);
    dequantize_row(pt, dst, back.data(), h);  // the weights as the predictor will see them
    // score = alpha * a + sum_j w_j (p_j + kappa * a) = g0 * a + w . p + margin.
    double sum_w = 0.0;
    for (int64_t j = 0; j < r; ++j) sum_w += back[1 + j];
    row[0] = static_cast<float>(g.g0[i] - kappa * sum_w + kMargin * g.sd[i] / fs.a);
    quantize_row(pt, row.data(), dst, h);
  }
}

// ffn_down [n_embd, n_ff] and ffn_down_t [n_ff, n_embd] from the same values; rows of ffn_down
// (columns of ffn_down_t) for the frozen coordinates are zero.
void add_down(TensorStore& store, const std::string& prefix, const SynthOptions& o,
              const SparseLayout& l, Rng& rng) {
  const int64_t d = o.n_embd, n_ff = o.n_ff;
  const float amp = std::sqrt(3.0f / static_cast<float>(n_ff));  // variance 1 / n_ff
  std::vector<float> dt(static_cast<size_t>(n_ff * d));          // neuron-major
  for (int64_t i = 0; i < n_ff; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      const float v = amp * rng.symmetric();
      dt[i * d + k] = k < l.frozen ? 0.0f : v;
    }
  }
  uint8_t* down = store.add(prefix + "ffn_down.weight", d, n_ff, o.type);
  std::vector<float> col(static_cast<size_t>(n_ff));
  const int64_t rb = row_bytes(o.type, n_ff);
  for (int64_t k = 0; k < d; ++k) {
    for (int64_t i = 0; i < n_ff; ++i) col[i] = dt[i * d + k];
    quantize_row(o.type, col.data(), down + k * rb, n_ff);
  }
  uint8_t* down_t = store.add(prefix + "ffn_down_t.weight", n_ff, d, o.type);
  quantize_rows(o.type, dt.data(), down_t, n_ff, d);
}

}  // namespace

void write_sparse_model(const SynthOptions& o, const std::string& path) {
  const SparseLayout l = sparse_layout(o);
  gguf::GgufWriter w;
  write_header(o, w);
  w.set_f32("hearth.sparse_threshold", 0.0f);
  w.set_f32("hearth.synth.sparsity", static_cast<float>(*o.sparsity));
  w.set_f32("hearth.synth.skew", static_cast<float>(o.skew));

  Rng rng(o.seed);
  TensorStore store{{}, w};
  const int64_t head_dim = o.n_embd / o.n_head;
  const int64_t kv_dim = o.n_head_kv * head_dim;
  const float v_embd = 1.0f / static_cast<float>(o.n_embd);
  const auto frozen = [&](int64_t row) { return row < l.frozen; };
  const std::vector<double> freq = synth_firing_frequencies(o.n_ff, *o.sparsity, o.skew);

  const FeatureStats fs = add_embedding(store, o, l, rng);
  store.add_ones("output_norm.weight", o.n_embd);
  store.add_matrix("output.weight", o.n_vocab, o.n_embd, v_embd, o.type, rng);
  for (int64_t i = 0; i < o.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    store.add_attention(p, o.n_embd, kv_dim, o.type, rng, frozen);
    store.add_ones(p + "ffn_norm.weight", o.n_embd);
    const GateRows gate = add_gate(store, p + "ffn_gate.weight", o, l, fs, freq, rng);
    store.add_matrix(p + "ffn_up.weight", o.n_ff, o.n_embd, v_embd, o.type, rng);
    add_down(store, p, o, l, rng);
    add_predictor(store, p, o, l, fs, gate);
  }
  w.write(path);
}

}  // namespace hearth::synth_detail
