// The core SentencePiece and BPE share: the text as a linked list of symbols (initially one per
// UTF-8 character), and the repeated merge of the best adjacent pair until none can merge. The two
// tokenizers differ only in how a pair is ranked and how the final symbols become ids.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace hearth::text {

// A run of the text; a merge grows the left symbol and leaves the absorbed one empty (n == 0).
struct MergeSymbol {
  uint32_t start;
  uint32_t n;
  int32_t prev;  // -1 at the ends
  int32_t next;
};

// One symbol per UTF-8 character of text (a malformed lead byte makes a one-byte symbol).
// The text must be shorter than 2^31 bytes.
std::vector<MergeSymbol> split_utf8_symbols(std::string_view text);

// Merges adjacent symbols while some pair is mergeable. priority(left, right) returns nullopt when
// the pair cannot merge, else its priority: the highest merges first, ties go to the leftmost pair
// (llama.cpp's order, which keeps results deterministic).
template <typename Priority>
void merge_pairs(std::vector<MergeSymbol>& symbols, Priority priority) {
  struct Bigram {
    double priority;
    int32_t left;
    int32_t right;
    uint32_t size;  // bytes of left + right when queued; a mismatch later means it is stale
  };
  struct Lower {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };
  std::vector<Bigram> storage;
  storage.reserve(symbols.size() * 2);
  std::priority_queue<Bigram, std::vector<Bigram>, Lower> queue(Lower{}, std::move(storage));
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::optional<double> p = priority(symbols[left], symbols[right]);
    if (p) queue.push({*p, left, right, symbols[left].n + symbols[right].n});
  };

  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[top.left];
    MergeSymbol& right = symbols[top.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != top.size) continue;

    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;

    try_add(left.prev, top.left);
    try_add(top.left, left.next);
  }
}

}  // namespace hearth::text
