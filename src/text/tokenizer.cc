#include "text/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "text/bpe.h"
#include "text/special_tokens.h"
#include "text/spm.h"
#include "text/unicode.h"

namespace hearth::text {

namespace {

// DeepSeek's "<｜end▁of▁sentence｜>", with full-width bars and U+2581 for the spaces.
constexpr std::string_view kDeepSeekEndOfSentence = "<\uFF5Cend\u2581of\u2581sentence\uFF5C>";

// Tokens that end generation although no key names them; converters rarely record EOT/EOM ids.
// Same list as llama.cpp, which also forces these tokens to be control tokens.
// clang-format off
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<EOT>", "_<EOT>", kDeepSeekEndOfSentence,
};
// clang-format on

// Which of them is the end-of-turn token when tokenizer.ggml.eot_token_id is absent, by priority.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
};

// SentencePiece prints its unknown token as U+2585 LOWER FIVE EIGHTHS BLOCK.
constexpr std::string_view kSpmUnknownPiece = "\xE2\x96\x85";

void check_special_id(const std::string& source, std::string_view key, int32_t id, int32_t n) {
  if (id < -1 || id >= n) {
    fail(source, ": ", key, " ", id, " is out of range (the vocabulary has ", n, " tokens)");
  }
}

// What a token prints as; see token_to_piece.
std::string piece_for(const std::string& text, TokenType type, bool spm) {
  switch (type) {
    case TokenType::Normal:
      if (spm) return spm_unescape(text);
      {
        std::string bytes;
        append_byte_level_decoded(text, bytes);
        return bytes;
      }
    case TokenType::UserDefined:
      return spm ? spm_unescape(text) : text;
    case TokenType::Byte:
      return std::string(1, static_cast<char>(parse_byte_token(text)));
    case TokenType::Unknown:
      return spm ? std::string(kSpmUnknownPiece) : std::string();
    case TokenType::Undefined:
    case TokenType::Control:
    case TokenType::Unused:
      break;
  }
  return {};
}

}  // namespace

Tokenizer::Tokenizer(TokenizerData data)
    : source_(data.source.empty() ? std::string("tokenizer") : std::move(data.source)),
      model_(std::move(data.model)) {
  const std::string& src = source_;
  if (model_ != "llama" && model_ != "gpt2") {
    fail(src, ": tokenizer.ggml.model '", model_,
         "' is not supported (expected 'llama' for SentencePiece or 'gpt2' for byte-level BPE)");
  }
  const bool spm = model_ == "llama";

  const size_t n = data.tokens.size();
  if (n == 0) fail(src, ": tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail(src, ": tokenizer.ggml.tokens has ", n, " entries");
  }
  const auto n_tokens = static_cast<int32_t>(n);
  if (!data.scores.empty() && data.scores.size() != n) {
    fail(src, ": tokenizer.ggml.scores has ", data.scores.size(), " entries for ", n, " tokens");
  }
  if (!data.types.empty() && data.types.size() != n) {
    fail(src, ": tokenizer.ggml.token_type has ", data.types.size(), " entries for ", n, " tokens");
  }

  build_vocab(data);

  check_special_id(src, "tokenizer.ggml.bos_token_id", data.bos_id, n_tokens);
  check_special_id(src, "tokenizer.ggml.eos_token_id", data.eos_id, n_tokens);
  check_special_id(src, "tokenizer.ggml.unknown_token_id", data.unk_id, n_tokens);
  check_special_id(src, "tokenizer.ggml.padding_token_id", data.pad_id, n_tokens);
  check_special_id(src, "tokenizer.ggml.eot_token_id", data.eot_id, n_tokens);
  check_special_id(src, "tokenizer.ggml.eom_token_id", data.eom_id, n_tokens);
  bos_id_ = data.bos_id;
  eos_id_ = data.eos_id;
  unk_id_ = data.unk_id;
  pad_id_ = data.pad_id;
  eot_id_ = data.eot_id;
  add_bos_ = data.add_bos.value_or(spm);
  add_eos_ = data.add_eos.value_or(false);
  // llama.cpp's BPE encoder never adds a prefix space, whatever the key says; decode follows suit.
  add_space_prefix_ = spm && data.add_space_prefix.value_or(true);

  mark_end_of_generation(data.eom_id);

  pieces_.reserve(n);
  for (int32_t id = 0; id < n_tokens; ++id) {
    pieces_.push_back(piece_for(vocab_.text[id], vocab_.type[id], spm));
  }

  splitter_ = std::make_unique<SpecialTokenSplitter>(vocab_);
  if (spm) {
    spm_ = std::make_unique<SpmEncoder>(vocab_, unk_id_);
  } else {
    bpe_ = std::make_unique<BpeEncoder>(vocab_, std::move(data.merges),
                                        data.pre.empty() ? "default" : data.pre, source_);
    // Some pre-tokenizer names (Llama 3's among them) add BOS unless the file says otherwise.
    if (!data.add_bos) add_bos_ = bpe_->pre_tokenizer().add_bos();
  }
}

// Takes the token texts, scores and types out of `data` (their sizes already checked) and indexes
// the texts, refusing repeated texts, NaN scores, unknown types and malformed byte tokens.
void Tokenizer::build_vocab(TokenizerData& data) {
  const std::string& src = source_;
  const size_t n = data.tokens.size();
  vocab_.text = std::move(data.tokens);
  vocab_.score = data.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(data.scores);
  vocab_.type =
      data.types.empty() ? std::vector<TokenType>(n, TokenType::Normal) : std::move(data.types);
  vocab_.index.reserve(n);
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    const std::string& text = vocab_.text[id];
    if (std::isnan(vocab_.score[id])) fail(src, ": tokenizer.ggml.scores[", id, "] is NaN");
    const auto type = static_cast<int32_t>(vocab_.type[id]);
    if (type < 0 || type > kMaxTokenType) {
      fail(src, ": tokenizer.ggml.token_type[", id, "] is ", type, " (expected 0..", kMaxTokenType,
           ")");
    }
    if (vocab_.type[id] == TokenType::Byte && parse_byte_token(text) < 0) {
      fail(src, ": tokenizer.ggml.tokens[", id, "] '", text, "' has type byte but is not <0xXX>");
    }
    if (text.empty()) continue;  // nothing can match it; llama.cpp renames such tokens
    vocab_.max_text_len = std::max(vocab_.max_text_len, text.size());
    const auto [it, inserted] = vocab_.index.emplace(text, id);
    if (!inserted) {
      fail(src, ": tokenizer.ggml.tokens[", id, "] '", text, "' repeats token ", it->second);
    }
  }
}

// End-of-generation tokens: EOS, EOT and EOM from the file, plus the known end-of-turn texts
// (kEndOfGenerationTexts, which also become control tokens); the EOT id falls back to the first
// of kEndOfTurnTexts the vocabulary has.
void Tokenizer::mark_end_of_generation(int32_t eom_id) {
  const size_t n = vocab_.text.size();
  eog_.assign(n, false);
  for (const std::string_view text : kEndOfGenerationTexts) {
    const int32_t id = vocab_.find(text);
    if (id < 0) continue;
    eog_[id] = true;
    vocab_.type[id] = TokenType::Control;
  }
  if (eot_id_ < 0) {
    for (const std::string_view text : kEndOfTurnTexts) {
      eot_id_ = vocab_.find(text);
      if (eot_id_ >= 0) break;
    }
  }
  for (const int32_t id : {eos_id_, eot_id_, eom_id}) {
    if (id >= 0) eog_[id] = true;
  }
}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                       std::span<const std::pair<size_t, size_t>> literal) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  const std::vector<Fragment> fragments = splitter_->split(text, parse_special, literal);
  if (spm_) {
    encode_spm(fragments, out);
  } else {
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        out.push_back(fragment.token);
      } else {
        bpe_->encode(fragment.text, out);
      }
    }
  }
  return out;
}

void Tokenizer::encode_spm(const std::vector<Fragment>& fragments,
                           std::vector<int32_t>& out) const {
  // The dummy prefix goes at the start of the text and after each special token, so that a word
  // there is spelled like a word after a space, as SentencePiece's training data had it.
  bool after_special = true;
  std::string escaped;
  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    escaped.clear();
    if (add_space_prefix_ && after_special) escaped.append(kSpmSpace);
    append_spm_escaped(fragment.text, escaped);
    spm_->encode(escaped, out);
    after_special = false;
  }
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= n_vocab()) {
    fail(source_, ": token id ", id, " is out of range (the vocabulary has ", n_vocab(),
         " tokens)");
  }
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  check_id(id);
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    check_id(ids[i]);
    const std::string& piece = pieces_[ids[i]];
    if (i == 0 && add_space_prefix_ && !piece.empty() && piece[0] == ' ') {
      out.append(piece, 1);
    } else {
      out.append(piece);
    }
  }
  return out;
}

bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && eog_[id]; }

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && vocab_.type[id] == TokenType::Control;
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return vocab_.type[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.text[id];
}

}  // namespace hearth::text
