// Rewriting a model's weight matrices in another dtype (`hearth quantize`), as llama.cpp's
// llama-quantize users expect: the matrices of the architecture's weight list go to the target
// type, everything else (norms, biases, learned positions, activation statistics, and by default
// the predictors) is copied unchanged, as is every metadata key and the PWRI magic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace hearth {

namespace gguf {
class GgufFile;
}  // namespace gguf

struct QuantizeOptions {
  // Also convert the predictors (blk.N.fc1/fc2). Off by default: they are small, and their scores
  // are compared against a threshold, so their rounding changes which neurons run.
  bool quantize_predictors = false;
  // llama-quantize's --output-tensor-type: the type of the output projection (token_embd when the
  // output is tied to it) instead of the target type. llama.cpp's own default mixture keeps it at
  // Q6_K for 4-bit targets; Hearth has no Q6_K, so `--output-tensor-type q8_0` is the closest.
  std::optional<DType> output_type;
  // llama-quantize's --tensor-type PATTERN=TYPE: a tensor whose name contains a match of the
  // regular expression PATTERN (ECMAScript, searched, not anchored) takes TYPE instead of the
  // target or output type; the first matching rule wins. Only matrices the target would convert
  // are affected (norms, predictors and position tables stay as they are).
  std::vector<std::pair<std::string, DType>> tensor_types;
  // Q4_0 scales chosen per block for the least squared error (quantize_block_q4_0_search) instead
  // of ggml's reference rounding (--reference-rounding turns this off for byte-identical files).
  bool search_scales = true;
  // An importance matrix file (hearth imatrix, or llama.cpp's GGUF imatrix): the Q4_0 search
  // weighs each column's squared error by the mean square of the activations it multiplies.
  // Empty: every column weighs the same.
  std::string imatrix;
};

// A matrix that could not take its type (`wanted`) because its row length is not a multiple of the
// type's block size; it was stored as `kept` (f16, or its own type when that is bf16).
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
  DType type = DType::Q8_0;
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
  // With an imatrix: its entries and tokens, and of the tensors converted to Q4_0 how many were
  // weighted by it (the rest, e.g. token_embd, which is looked up rather than multiplied, were not).
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
inline constexpr const char* kQuantizeTargets = "f32, f16, bf16, q8_0, q4_0";

// Hearth's default tensor mix (`hearth quantize` without --pure), a rule for every model: for q4_0
// the output projection at q8_0 (llama.cpp keeps it at Q6_K in 4-bit files; Hearth has no Q6_K)
// unless options.output_type is set, every attn_v at q8_0 (as llama.cpp's Q4_K_M and Q5_K_M
// mixes promote attn_v: the most sensitive attention matrix), and with grouped-query attention
// (`grouped_query`: fewer KV heads than query heads) every attn_k too: then K and V are the
// smallest matrices of a layer (n_head_kv / n_head of Q's rows) and each of their rows serves
// several query heads, so their error counts that many times (llama.cpp's low-bit mixes also
// raise attn_k with the GQA factor). Other types: no change.
void apply_default_mix(DType type, bool grouped_query, QuantizeOptions& options);

// Whether a model file has fewer KV heads than query heads (the `grouped_query` above), from the
// keys llama.cpp writes ({arch}.attention.head_count and head_count_kv; a missing KV count means
// as many as query heads). Read from the keys alone, not the model's config, so a file of an
// architecture Hearth does not run still quantizes.
bool grouped_query_attention(const gguf::GgufFile& file);

// llama.cpp's general.file_type (enum llama_ftype) for a model whose matrices are mostly `type`:
// ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
uint32_t llama_file_type(DType type);

// Converts the model at `in` and writes it to `out` (through a temporary file renamed at the end,
// so a failed run leaves nothing under `out`). Checks everything it can before converting: the
// type, the input (it must load as a model), `out` not being `in`, `out`'s directory being
// writable. Throws hearth::Error with one clear line on any problem.
QuantizeReport quantize_model(const std::string& in, const std::string& out, DType type,
                              const QuantizeOptions& options = {});

}  // namespace hearth
