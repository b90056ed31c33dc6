// Pieces shared by the dense and the sparse synthetic-model writers (synth.cc, synth_sparse.cc):
// the random stream and the storage that keeps tensor bytes alive until the file is written.
// Internal to src/model.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "model/synth.h"

namespace hearth::synth_detail {

// xoshiro256+ seeded through splitmix64: fast, portable, and the same stream on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      s = z ^ (z >> 31);
    }
  }
  // Uniform in [-1, 1).
  float symmetric() { return static_cast<float>(static_cast<int64_t>(next()) >> 40) * 0x1.0p-23f; }
  // Uniform in (0, 1].
  double open01() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  // Standard normal (Box-Muller; the second value of each pair is discarded for simplicity).
  double gaussian() {
    const double u = open01(), v = open01();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>(open01() * static_cast<double>(n)) % n;
  }

 private:
  uint64_t next() {
    const uint64_t r = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return r;
  }
  uint64_t s_[4];
};

// Tensor storage kept alive until the writer has written the file. Only the stored (possibly
// quantized) bytes are kept, never a float copy of the model.
struct TensorStore {
  std::vector<std::unique_ptr<std::vector<uint8_t>>> blobs;
  gguf::GgufWriter& writer;

  // Space for a [rows, cols] matrix in `type`, registered with the writer under `name`.
  uint8_t* add(const std::string& name, int64_t rows, int64_t cols, DType type) {
    const int64_t rb = row_bytes(type, cols);
    auto& blob =
        *blobs.emplace_back(std::make_unique<std::vector<uint8_t>>(static_cast<size_t>(rb * rows)));
    const int64_t ne[2] = {cols, rows};
    writer.add_tensor(name, static_cast<uint32_t>(type), ne, blob.data(), blob.size());
    return blob.data();
  }

  // A [rows, cols] matrix, uniform with variance `var`, stored in `type`. Rows for which
  // zero_row(r) holds are all zeros (their random values are still drawn, so the stream does not
  // depend on the mask).
  template <typename ZeroRow>
  void add_matrix(const std::string& name, int64_t rows, int64_t cols, float var, DType type,
                  Rng& rng, ZeroRow zero_row) {
    const float a = std::sqrt(3.0f * var);  // uniform(-a, a) has variance a^2 / 3
    std::vector<float> row(static_cast<size_t>(cols));
    const int64_t rb = row_bytes(type, cols);
    uint8_t* data = add(name, rows, cols, type);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = a * rng.symmetric();
      if (zero_row(r)) std::fill(row.begin(), row.end(), 0.0f);
      quantize_row(type, row.data(), data + r * rb, cols);
    }
  }
  void add_matrix(const std::string& name, int64_t rows, int64_t cols, float var, DType type,
                  Rng& rng) {
    add_matrix(name, rows, cols, var, type, rng, [](int64_t) { return false; });
  }

  // One layer's attention under prefix p: attn_norm (ones), then q, k, v and output, uniform
  // with variance 1/n_embd (the residual stream stays at unit scale); rows r of attn_output with
  // zero_wo_row(r) are zeros.
  template <typename ZeroRow>
  void add_attention(const std::string& p, int64_t n_embd, int64_t kv_dim, DType type, Rng& rng,
                     ZeroRow zero_wo_row) {
    const float v_embd = 1.0f / static_cast<float>(n_embd);
    const auto none = [](int64_t) { return false; };
    add_ones(p + "attn_norm.weight", n_embd);
    add_matrix(p + "attn_q.weight", n_embd, n_embd, v_embd, type, rng, none);
    add_matrix(p + "attn_k.weight", kv_dim, n_embd, v_embd, type, rng, none);
    add_matrix(p + "attn_v.weight", kv_dim, n_embd, v_embd, type, rng, none);
    add_matrix(p + "attn_output.weight", n_embd, n_embd, v_embd, type, rng, zero_wo_row);
  }

  void add_ones(const std::string& name, int64_t n) {
    auto& blob =
        *blobs.emplace_back(std::make_unique<std::vector<uint8_t>>(static_cast<size_t>(n) * 4));
    const float one = 1.0f;
    for (int64_t i = 0; i < n; ++i) std::memcpy(blob.data() + 4 * i, &one, 4);
    const int64_t ne[1] = {n};
    writer.add_tensor(name, static_cast<uint32_t>(DType::F32), ne, blob.data(), blob.size());
  }
};

// Where a sparse model's construction lives in the hidden state (synth_sparse.cc): coordinate 0
// carries a constant, coordinates [first_feature, first_feature + features) carry the token
// features that decide which neurons fire, and no layer writes to coordinates [0, frozen).
struct SparseLayout {
  int64_t width = 0;          // H: predictor hidden width (one row for the constant + features)
  int64_t features = 0;       // H - 1
  int64_t first_feature = 0;  // a block boundary of the weight type, so the constant has a block
  int64_t frozen = 0;         // first_feature + features, up to a block boundary if below n_embd
};
SparseLayout sparse_layout(const SynthOptions& options);

// The metadata every synthetic model carries: architecture, shapes, activation, tokenizer.
void write_header(const SynthOptions& options, gguf::GgufWriter& writer);

// The sparse (ReGLU + predictors) model of synth_sparse.cc; `options` are validated.
void write_sparse_model(const SynthOptions& options, const std::string& path);

}  // namespace hearth::synth_detail
