#include "text/bpe.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "text/pair_merge.h"
#include "text/unicode.h"

namespace hearth::text {

BpeEncoder::BpeEncoder(const Vocab& vocab, std::vector<std::string> merges, std::string_view pre,
                       const std::string& source)
    : vocab_(vocab), merges_(std::move(merges)) {
  try {
    pre_ = PreTokenizer::create(pre);
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  if (merges_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail(source, ": tokenizer.ggml.merges has ", merges_.size(), " entries");
  }
  ranks_.reserve(merges_.size());
  for (size_t i = 0; i < merges_.size(); ++i) {
    const std::string& merge = merges_[i];
    // The first part may itself be a lone space in non-byte-level vocabularies, hence from 1.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 == merge.size()) {
      fail(source, ": tokenizer.ggml.merges[", i, "] '", merge,
           "' is not two tokens separated by a space");
    }
    max_merge_len_ = std::max(max_merge_len_, merge.size());
    ranks_.emplace(merge, static_cast<int32_t>(i));  // a repeated merge keeps its first rank
  }
}

int32_t BpeEncoder::rank(std::string_view left, std::string_view right, std::string& key) const {
  if (left.size() + 1 + right.size() > max_merge_len_) return -1;
  key.assign(left);
  key.push_back(' ');
  key.append(right);
  const auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::string valid_storage;
  const std::string_view valid = make_valid_utf8(text, valid_storage);
  std::vector<std::string_view> words;
  pre_->split(valid, words);

  std::string mapped;
  for (const std::string_view word : words) {
    mapped.clear();
    for (const char c : word) mapped.append(byte_to_unicode(static_cast<uint8_t>(c)));
    encode_word(mapped, out);
  }
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("cannot tokenize a word of ", word.size(), " bytes");
  }
  if (pre_->ignore_merges()) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  std::vector<MergeSymbol> symbols = split_utf8_symbols(word);
  std::string key;
  // Lower ranks merge first.
  merge_pairs(symbols,
              [&](const MergeSymbol& left, const MergeSymbol& right) -> std::optional<double> {
                const int32_t found =
                    rank(word.substr(left.start, left.n), word.substr(right.start, right.n), key);
                if (found < 0) return std::nullopt;
                return -static_cast<double>(found);
              });

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = word.substr(symbols[i].start, symbols[i].n);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Only a malformed vocabulary gets here (a character without a token, or a merge whose result
    // is not a token): keep the one-byte tokens it has, as llama.cpp does.
    for (size_t j = 0; j < piece.size(); ++j) {
      const int32_t byte_id = vocab_.find(piece.substr(j, 1));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace hearth::text
