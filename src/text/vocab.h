// The token table shared by the SentencePiece and BPE encoders.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hearth::text {

// Values of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};
inline constexpr int32_t kMaxTokenType = 6;

// Texts, scores and types by id, plus the text -> id index. The index holds views into `text`, so
// a Vocab is filled once by Tokenizer and never copied or moved afterwards.
struct Vocab {
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<TokenType> type;
  std::unordered_map<std::string_view, int32_t> index;
  size_t max_text_len = 0;  // longest token text, in bytes

  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  int32_t size() const { return static_cast<int32_t>(text.size()); }
  // The id whose text is exactly `s`, or -1.
  int32_t find(std::string_view s) const {
    const auto it = index.find(s);
    return it == index.end() ? -1 : it->second;
  }
};

}  // namespace hearth::text
