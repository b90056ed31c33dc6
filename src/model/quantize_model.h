// Rewriting a model's weight matrices in another dtype (`hearth quantize`), as llama.cpp's
// llama-quantize users expect: the matrices of the architecture's weight list go to the target
// type, everything else (norms, biases, learned positions, activation statistics, and by default
// the predictors) is copied unchanged, as is every metadata key and the PWRI magic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace hearth {

namespace gguf {
class GgufFile;
}  // namespace gguf

// A `hearth quantize` target: the type of the matrices and llama-quantize's size variant, which
// names a tensor mix (apply_default_mix) and the file's general.file_type. kSmall and kMedium are
// the K-quants' _S and _M; every other type has kPlain.
enum class QuantizeMix { kPlain, kSmall, kMedium };
struct QuantizeTarget {
  DType type = DType::Q8_0;
  QuantizeMix mix = QuantizeMix::kPlain;
  QuantizeTarget() = default;
  QuantizeTarget(DType t, QuantizeMix m = QuantizeMix::kPlain) : type(t), mix(m) {}  // NOLINT
  bool operator==(const QuantizeTarget&) const = default;
};

struct QuantizeOptions {
  // Also convert the predictors (blk.N.fc1/fc2). Off by default: they are small, and their scores
  // are compared against a threshold, so their rounding changes which neurons run.
  bool quantize_predictors = false;
  // llama-quantize's --output-tensor-type: the type of the output projection (token_embd when the
  // output is tied to it) instead of the target type (the default mix sets q6_k or q8_0).
  std::optional<DType> output_type;
  // llama-quantize's --tensor-type PATTERN=TYPE: a tensor whose name contains a match of the
  // regular expression PATTERN (ECMAScript, searched, not anchored) takes TYPE instead of the
  // target or output type; the first matching rule wins. Only matrices the target would convert
  // are affected (norms, predictors and position tables stay as they are).
  std::vector<std::pair<std::string, DType>> tensor_types;
  // Scales chosen per block by the searches of quantize_row_search (Q4_0: the least squared
  // error) instead of ggml's reference algorithms (--reference-rounding turns this off; for Q4_0,
  // Q8_0 it gives files byte-identical to llama-quantize's).
  bool search_scales = true;
  // An importance matrix file (hearth imatrix, or llama.cpp's GGUF imatrix): the searches of Q4_0,
  // Q4_1, Q5_0, Q5_1, the K-quants and the IQ4 types weigh each column's squared error by the
  // mean square of the activations it multiplies (Q4_0 uses GPTQ instead when the file has Gram
  // matrices). Empty: every column weighs the same.
  std::string imatrix;
};

// A matrix that could not take its type (`wanted`) because its row length is not a multiple of the
// type's block size; it was stored as `kept`: for a 256-weight type a 32-weight one as llama.cpp
// picks (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, q2_k / q3_k / iq4_xs -> iq4_nl) when the row
// holds those blocks, else f16 (or its own type when that is bf16).
struct QuantizeFallback {
  std::string name;
  int64_t row_length = 0;
  DType wanted = DType::Q8_0;
  DType kept = DType::F16;
};

// A matrix stored in another type than the target by the output type, a --tensor-type rule or the
// default mix, and the bytes that cost over the target type.
struct QuantizePromotion {
  std::string name;
  DType type = DType::Q8_0;
  int64_t extra_bytes = 0;
};

struct QuantizeReport {
  QuantizeTarget target;
  DType type = DType::Q8_0;  // target.type
  bool powerinfer = false;   // the input (and so the output) has the PWRI magic
  uint64_t input_bytes = 0;  // file sizes
  uint64_t output_bytes = 0;
  // Tensor counts by ggml type id, before and after.
  std::map<uint32_t, int64_t> input_types;
  std::map<uint32_t, int64_t> output_types;
  int64_t converted = 0;  // tensors whose data was rewritten
  int64_t requantized = 0;  // of those, tensors that were already Q8_0/Q4_0 (error compounds)
  std::vector<QuantizeFallback> fallbacks;
  std::vector<QuantizePromotion> promotions;
  // output.weight is a byte-identical copy of token_embd.weight (tied embeddings stored twice):
  // token_embd then takes the output's type too.
  bool tied_copy = false;
  // With an imatrix: its entries and tokens, and of the tensors converted to a type that uses it
  // (q4_0, and the types of core/quant_blocks.h) how many were weighted by it (the rest, e.g.
  // token_embd, which is looked up rather than multiplied, were not). GPTQ is q4_0's only.
  int64_t imatrix_entries = 0;
  int64_t imatrix_tokens = 0;
  int64_t imatrix_weighted = 0;  // by the mean squares (diagonal) only
  int64_t imatrix_gptq = 0;      // by GPTQ with the entry's Gram matrix
  int64_t imatrix_unweighted = 0;

  double ratio() const {
    return output_bytes > 0 ? static_cast<double>(input_bytes) / static_cast<double>(output_bytes)
                            : 0.0;
  }
};

// The dtypes `hearth quantize` writes (every one Hearth computes with) and their ggml names.
bool is_quantize_target(DType type);

// The target names `hearth quantize` accepts: every type of is_quantize_target by its ggml name,
// and q3_k_s, q3_k_m, q4_k_s, q4_k_m, q5_k_s, q5_k_m (q3_k, q4_k and q5_k are the _s variants).
inline constexpr const char* kQuantizeTargets =
    "f32, f16, bf16, q8_0, q6_k, q5_k_m, q5_k (q5_k_s), q5_1, q5_0, q4_k_m, q4_k (q4_k_s), q4_1, "
    "q4_0, iq4_nl, iq4_xs, q3_k_m, q3_k (q3_k_s), q2_k";
std::optional<QuantizeTarget> parse_quantize_target(std::string_view name);
// "q4_k_m", "q8_0", ...
std::string quantize_target_name(const QuantizeTarget& target);

// What the default mix needs to know of a model, read from the keys llama.cpp writes (so a file
// of an architecture Hearth does not run still quantizes).
struct MixShape {
  int64_t n_layer = 0;     // {arch}.block_count (0: unknown, no per-layer rules)
  int64_t n_head = 1;      // {arch}.attention.head_count
  int64_t n_head_kv = 1;   // {arch}.attention.head_count_kv (missing: n_head)
  bool grouped_query() const { return n_head_kv < n_head; }
  int64_t n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
};
MixShape mix_shape(const gguf::GgufFile& file);

// llama.cpp's use_more_bits: the layers whose attn_v / ffn_down its _M mixes give more bits: the
// first and last eighth of the n_layer layers and every third one between (i - n/8 = 2 mod 3).
bool use_more_bits(int64_t layer, int64_t n_layer);

// Hearth's default tensor mix (`hearth quantize` without --pure): --tensor-type rules appended
// after the user's own (which come first and win) and the output type unless the user set one.
// "output" is output.weight, or token_embd.weight when the output is tied to it. Rules:
//  - q4_0 (Hearth's own, kept from before the K-quants): output at q8_0, every attn_v at q8_0
//    (the most sensitive attention matrix), and with grouped-query attention every attn_k too:
//    then K and V are the smallest matrices of a layer and each of their rows serves several
//    query heads.
//  - every other block type but q8_0 and q6_k: output at q6_k, as llama.cpp does.
//  - iq4_nl, iq4_xs: attn_v at q5_k when n_head >= 4 n_head_kv (llama.cpp's rule).
//  - q2_k: attn_v at q4_k (n_head >= 4 n_head_kv) or q3_k; ffn_down and attn_output at q3_k.
//  - q3_k_m: attn_v at q5_k in layers 0-1, q4_k after; ffn_down at q5_k in the first 1/16 of the
//    layers, q4_k after; attn_output and a fused attn_qkv at q4_k.
//  - q4_k_s: attn_v in layers 0-3 and ffn_down in the first 1/8 of the layers at q5_k.
//  - q4_k_m, q5_k_m: attn_v and ffn_down (and ffn_down_t) at q6_k in the layers of
//    use_more_bits; a fused attn_qkv at q5_k (q4_k_m) or q6_k (q5_k_m).
//  - q3_k_s, q5_k_s, q6_k and the 16/32-bit types: no other change.
// Layer fractions are llama.cpp's integer divisions (i < n_layer / 8 ...). A row length the
// chosen type cannot hold is handled when quantizing (QuantizeFallback).
void apply_default_mix(const QuantizeTarget& target, const MixShape& shape, QuantizeOptions& options);

// llama.cpp's general.file_type (enum llama_ftype) for a target: ALL_F32 0, MOSTLY_F16 1,
// MOSTLY_Q4_0 2, MOSTLY_Q4_1 3, MOSTLY_Q8_0 7, MOSTLY_Q5_0 8, MOSTLY_Q5_1 9, MOSTLY_Q2_K 10,
// Q3_K_S 11, Q3_K_M 12, Q4_K_S 14, Q4_K_M 15, Q5_K_S 16, Q5_K_M 17, Q6_K 18, IQ4_NL 25,
// IQ4_XS 30, MOSTLY_BF16 32.
uint32_t llama_file_type(const QuantizeTarget& target);

// Converts the model at `in` and writes it to `out` (through a temporary file renamed at the end,
// so a failed run leaves nothing under `out`). Checks everything it can before converting: the
// type, the input (it must load as a model), `out` not being `in`, `out`'s directory being
// writable. Throws hearth::Error with one clear line on any problem.
QuantizeReport quantize_model(const std::string& in, const std::string& out,
                              const QuantizeTarget& target, const QuantizeOptions& options = {});

}  // namespace hearth
