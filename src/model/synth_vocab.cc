#include "model/synth_vocab.h"

#include <cstdio>

namespace hearth {
namespace {

constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's escaped space

}  // namespace

SynthVocab make_synth_vocab(int64_t n_vocab) {
  SynthVocab v;
  auto add = [&](std::string text, float score, int32_t type) {
    if (static_cast<int64_t>(v.tokens.size()) >= n_vocab) return;
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0.0f, 6);
  }
  // Pieces in order of growing length, each a one-character extension of an earlier piece, so the
  // SentencePiece bigram merge can reach every one. Earlier pieces get higher scores.
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  std::vector<std::string> frontier = {kSpace};
  add(kSpace, -1.0f, 1);
  for (char c = 33; c < 127; ++c) add(std::string(1, c), -2.0f, 1);
  for (char c : letters) frontier.emplace_back(1, c);
  float score = -3.0f;
  while (static_cast<int64_t>(v.tokens.size()) < n_vocab) {
    std::vector<std::string> next;
    for (const std::string& stem : frontier) {
      for (char c : letters) {
        next.push_back(stem + c);
        add(next.back(), score, 1);
        score -= 0.001f;
      }
      if (static_cast<int64_t>(v.tokens.size()) >= n_vocab) break;
    }
    frontier = std::move(next);
  }
  return v;
}

}  // namespace hearth
