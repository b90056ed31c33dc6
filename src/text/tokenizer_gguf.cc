// Tokenizer::from_gguf: the tokenizer.ggml.* keys of a GGUF file into TokenizerData.
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

namespace hearth::text {

namespace {

std::vector<std::string> to_strings(const std::vector<std::string_view>& views) {
  return {views.begin(), views.end()};
}

// Leaves `id` as it is when the key is absent; range against the vocabulary is checked later.
void read_id(const gguf::GgufFile& file, std::string_view key, int32_t& id) {
  const std::optional<int64_t> value = file.get_int(key);
  if (!value) return;
  // llama.cpp writes "no such token" as -1, which a u32 key stores as 0xFFFFFFFF.
  if (*value == -1 || *value == 0xFFFFFFFFll) {
    id = -1;
    return;
  }
  if (*value < 0 || *value > std::numeric_limits<int32_t>::max()) {
    fail(file.path(), ": ", key, " is ", *value, ", not a token id");
  }
  id = static_cast<int32_t>(*value);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  TokenizerData data;
  data.source = file.path();

  const std::optional<std::string_view> model = file.get_string("tokenizer.ggml.model");
  if (!model) fail(file.path(), ": tokenizer.ggml.model is missing (the file has no tokenizer)");
  data.model = *model;
  if (const auto pre = file.get_string("tokenizer.ggml.pre")) data.pre = *pre;

  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) fail(file.path(), ": tokenizer.ggml.tokens is missing");
  data.tokens = to_strings(*tokens);
  if (auto scores = file.get_float_array("tokenizer.ggml.scores")) data.scores = std::move(*scores);
  if (const auto types = file.get_int_array("tokenizer.ggml.token_type")) {
    data.types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t type = (*types)[i];
      if (type < 0 || type > kMaxTokenType) {
        fail(file.path(), ": tokenizer.ggml.token_type[", i, "] is ", type, " (expected 0..",
             kMaxTokenType, ")");
      }
      data.types.push_back(static_cast<TokenType>(type));
    }
  }
  if (const auto merges = file.get_string_array("tokenizer.ggml.merges")) {
    data.merges = to_strings(*merges);
  } else if (data.model == "gpt2") {
    fail(file.path(), ": tokenizer.ggml.merges is missing (a gpt2 tokenizer needs its merges)");
  }

  // llama.cpp's defaults for SentencePiece vocabularies written without these keys.
  if (data.model == "llama") {
    const auto n = static_cast<int64_t>(data.tokens.size());
    data.unk_id = n > 0 ? 0 : -1;
    data.bos_id = n > 1 ? 1 : -1;
    data.eos_id = n > 2 ? 2 : -1;
  }
  read_id(file, "tokenizer.ggml.bos_token_id", data.bos_id);
  read_id(file, "tokenizer.ggml.eos_token_id", data.eos_id);
  read_id(file, "tokenizer.ggml.unknown_token_id", data.unk_id);
  read_id(file, "tokenizer.ggml.padding_token_id", data.pad_id);
  read_id(file, "tokenizer.ggml.eot_token_id", data.eot_id);
  read_id(file, "tokenizer.ggml.eom_token_id", data.eom_id);
  data.add_bos = file.get_bool("tokenizer.ggml.add_bos_token");
  data.add_eos = file.get_bool("tokenizer.ggml.add_eos_token");
  data.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix");

  return std::make_unique<Tokenizer>(std::move(data));
}

}  // namespace hearth::text
