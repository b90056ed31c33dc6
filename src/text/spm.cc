#include "text/spm.h"

#include <cstdio>
#include <limits>
#include <queue>

#include "core/error.h"
#include "text/unicode.h"

namespace hearth::text {

namespace {

// A run of the input text; merged symbols grow to the right and the absorbed one is left empty.
struct Symbol {
  uint32_t start;
  uint32_t n;
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;  // bytes of left + right when queued; a mismatch later means it is stale
};

// Highest score first; on equal scores the leftmost pair, which keeps the result deterministic and
// equal to llama.cpp's.
struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab, int32_t unk_id) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = vocab_.find(hex);
    if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = id >= 0 ? id : unk_id;
  }
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("cannot tokenize a text of ", text.size(), " bytes (at most 2^31 - 1 per piece)");
  }

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(utf8_len_lenient(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(n), index - 1,
                       pos + n == text.size() ? -1 : index + 1});
    pos += n;
  }

  std::vector<Bigram> storage;
  storage.reserve(symbols.size() * 2);
  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue(LowerPriority{},
                                                                        std::move(storage));
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].n + symbols[right].n;
    if (size > vocab_.max_text_len) return;  // spares hashing long runs that cannot be tokens
    const int32_t id = vocab_.find(text.substr(symbols[left].start, size));
    if (id < 0) return;
    queue.push({vocab_.score[id], left, right, size});
  };

  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != top.size) continue;

    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;

    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].n);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token: spell it out as bytes, as SentencePiece's byte fallback does.
    for (const char c : piece) {
      const int32_t byte_id = byte_ids_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace hearth::text
