#include "model/synth.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/quantize.h"
#include "gguf/gguf.h"
#include "model/synth_vocab.h"

namespace hearth {
namespace {

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
  float symmetric() {
    const uint64_t r = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return static_cast<float>(static_cast<int64_t>(r) >> 40) * 0x1.0p-23f;
  }

 private:
  uint64_t s_[4];
};

// Tensor storage kept alive until the writer has written the file.
struct TensorStore {
  std::vector<std::unique_ptr<std::vector<uint8_t>>> blobs;
  gguf::GgufWriter& writer;

  // A [rows, cols] matrix, uniform with variance `var`, stored in `type`.
  void add_matrix(const std::string& name, int64_t rows, int64_t cols, float var, DType type, Rng& rng) {
    const float a = std::sqrt(3.0f * var);  // uniform(-a, a) has variance a^2 / 3
    std::vector<float> row(static_cast<size_t>(cols));
    const int64_t rb = row_bytes(type, cols);
    auto& blob = *blobs.emplace_back(std::make_unique<std::vector<uint8_t>>(static_cast<size_t>(rb * rows)));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = a * rng.symmetric();
      quantize_row(type, row.data(), blob.data() + r * rb, cols);
    }
    const int64_t ne[2] = {cols, rows};
    writer.add_tensor(name, static_cast<uint32_t>(type), ne, blob.data(), blob.size());
  }

  void add_ones(const std::string& name, int64_t n) {
    auto& blob = *blobs.emplace_back(std::make_unique<std::vector<uint8_t>>(static_cast<size_t>(n) * 4));
    const float one = 1.0f;
    for (int64_t i = 0; i < n; ++i) std::memcpy(blob.data() + 4 * i, &one, 4);
    const int64_t ne[1] = {n};
    writer.add_tensor(name, static_cast<uint32_t>(DType::F32), ne, blob.data(), blob.size());
  }
};

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
}

void write_synthetic_model(const SynthOptions& o, const std::string& path) {
  validate(o);
  gguf::GgufWriter w;
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
    store.add_ones(p + "attn_norm.weight", o.n_embd);
    store.add_matrix(p + "attn_q.weight", o.n_embd, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "attn_k.weight", kv_dim, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "attn_v.weight", kv_dim, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "attn_output.weight", o.n_embd, o.n_embd, v_embd, o.type, rng);
    store.add_ones(p + "ffn_norm.weight", o.n_embd);
    store.add_matrix(p + "ffn_gate.weight", o.n_ff, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "ffn_up.weight", o.n_ff, o.n_embd, v_embd, o.type, rng);
    store.add_matrix(p + "ffn_down.weight", o.n_embd, o.n_ff, 1.0f / static_cast<float>(o.n_ff), o.type, rng);
  }
  w.write(path);
}

}  // namespace hearth
