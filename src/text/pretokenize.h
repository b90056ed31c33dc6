// Pre-tokenization for byte-level BPE: the regexes that cut text into words before merging, chosen
// by tokenizer.ggml.pre. Supporting a new model's pre-tokenizer means adding its name (and, when no
// family has its regexes, a family) in pretokenize_families.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::text {

class PreTokenizer {
 public:
  // Compiles the regexes of the named pre-tokenizer; Error listing the known names when `name` is
  // not one of them.
  static std::unique_ptr<PreTokenizer> create(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Cuts well-formed UTF-8 `text` into pieces that cover it in order. Each regex of the entry is
  // applied in turn within the pieces of the previous one; text between matches becomes a piece of
  // its own. Appends views into `text` to `pieces`. Thread-safe.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

  // Whether a word that is itself a token is emitted whole, skipping merges (Llama 3 does this:
  // some of its tokens cannot be reached through its merge list).
  bool ignore_merges() const;

  // Whether the vocabulary adds BOS when the file does not say (llama.cpp's default per name).
  bool add_bos() const;

  // Every accepted tokenizer.ggml.pre value, comma-separated, for error messages.
  static std::string known_names();

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::text
