// Text <-> token ids for the two vocabulary types llama.cpp's GGUF files carry: "llama"
// (SentencePiece with byte fallback) and "gpt2" (byte-level BPE with a regex pre-tokenizer).
// Encoding reproduces llama.cpp's llama_tokenize token for token; decoding is byte-exact.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/vocab.h"

namespace hearth::gguf {
class GgufFile;
}

namespace hearth::text {

class SpmEncoder;
class BpeEncoder;
class SpecialTokenSplitter;
struct Fragment;

// Everything a tokenizer is made of, as plain data: from_gguf fills it from the tokenizer.ggml.*
// keys, tests build it by hand. Field comments name the GGUF key.
struct TokenizerData {
  std::string source;               // names the origin (a file path) in error messages
  std::string model;                // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;                  // tokenizer.ggml.pre; gpt2 only, empty means "default"
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens
  std::vector<float> scores;        // tokenizer.ggml.scores: empty (all 0) or one per token
  std::vector<TokenType> types;     // tokenizer.ggml.token_type: empty (all normal) or per token
  std::vector<std::string> merges;  // tokenizer.ggml.merges: "left right", gpt2 only
  // tokenizer.ggml.<name>_token_id; -1 when the vocabulary has none.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t eot_id = -1;  // end of turn
  int32_t eom_id = -1;  // end of message (Llama 3.1 tool calls)
  // tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix; nullopt: the model's default
  // (SentencePiece: true, false, true; BPE: false, false, false, except that some pre-tokenizers,
  // llama3's among them, default add_bos to true). BPE ignores add_space_prefix, as llama.cpp's BPE
  // encoder does.
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<bool> add_space_prefix;
};

class Tokenizer {
 public:
  // Validates everything (Error naming `data.source` and the key at fault): a supported model,
  // per-token arrays of the token count, known token types, no repeated token texts, special ids in
  // range, well-formed merges and <0xXX> byte tokens, a known pre-tokenizer.
  explicit Tokenizer(TokenizerData data);
  // Reads the tokenizer.ggml.* keys; Error naming the file and key when one is missing or
  // malformed. As in llama.cpp, a SentencePiece vocabulary without BOS/EOS/UNK keys gets ids
  // 1, 2 and 0.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`. add_bos prepends BOS (when the vocabulary has one). parse_special lets
  // control tokens written in the text ("<s>", "<|eot_id|>") become those tokens; user-defined
  // tokens are always matched, as in llama.cpp. SentencePiece adds its dummy-prefix space at the
  // start and after every special token. Thread-safe.
  // `literal`: byte ranges of text ([first, second), ascending, disjoint) where control and
  // unknown tokens are not parsed even with parse_special (a chat message's content).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                              std::span<const std::pair<size_t, size_t>> literal = {}) const;

  // The bytes token `id` stands for: SentencePiece "▁" becomes " " and <0xAB> the byte 0xAB,
  // byte-level BPE code points map back to their bytes, user-defined tokens are their text, an
  // unknown SentencePiece token is U+2585 (as llama.cpp prints it), and control, unused and unknown
  // BPE tokens are empty. Error when id is out of range.
  std::string token_to_piece(int32_t id) const;

  // The pieces concatenated. Like llama.cpp's detokenizer, when the vocabulary adds a dummy prefix
  // the first token loses one leading space; a leading BOS takes that role (its piece is empty), so
  // decode(encode(x, true, ...)) keeps the prefix space and decode(encode(x, false, false)) == x
  // for well-formed UTF-8 x. No clean-up of spaces before punctuation is done (llama.cpp does it
  // for some BPE vocabularies). Error when an id is out of range.
  std::string decode(std::span<const int32_t> ids) const;

  int32_t n_vocab() const { return vocab_.size(); }
  int32_t bos() const { return bos_id_; }
  int32_t eos() const { return eos_id_; }
  int32_t eot() const { return eot_id_; }
  int32_t unk() const { return unk_id_; }
  int32_t pad() const { return pad_id_; }
  bool add_bos_default() const { return add_bos_; }
  bool add_eos_default() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // End of generation: EOS, EOT, EOM and the tokens llama.cpp recognizes by text ("<|eot_id|>",
  // "<|im_end|>", "<|endoftext|>", ...). Out-of-range ids are not.
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const;
  TokenType token_type(int32_t id) const;
  std::string_view model() const { return model_; }
  const std::string& token_text(int32_t id) const;

 private:
  void check_id(int32_t id) const;
  void build_vocab(TokenizerData& data);
  void mark_end_of_generation(int32_t eom_id);
  void encode_spm(const std::vector<Fragment>& fragments, std::vector<int32_t>& out) const;

  std::string source_;
  std::string model_;
  Vocab vocab_;
  std::vector<std::string> pieces_;  // token_to_piece of every id, computed once
  std::vector<bool> eog_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t eot_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t pad_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  std::unique_ptr<SpecialTokenSplitter> splitter_;
  std::unique_ptr<SpmEncoder> spm_;  // exactly one of spm_ and bpe_ is set
  std::unique_ptr<BpeEncoder> bpe_;
};

}  // namespace hearth::text
