// The small SentencePiece vocabulary of synthetic models: <unk>, <s>, </s>, the 256 byte-fallback
// tokens, then printable pieces of growing length so any text still tokenizes sensibly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth {

struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp token types: 1 normal, 2 unknown, 3 control, 6 byte
};

inline constexpr int64_t kSynthMinVocab = 3 + 256;

SynthVocab make_synth_vocab(int64_t n_vocab);

}  // namespace hearth
