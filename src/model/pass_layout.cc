#include "model/pass_layout.h"

namespace hearth {

PassLayout::PassLayout(int32_t n_seq, int32_t n_batch)
    : chunks_(static_cast<size_t>(n_seq)),
      ffn_chunks_(static_cast<size_t>(n_seq)),
      row_pos_(static_cast<size_t>(n_batch)),
      attn_chunks_(static_cast<size_t>(n_seq)) {}

int64_t PassLayout::plan(std::span<const SeqTokens> batch, const KvCache& kv, bool dense_prompts) {
  int64_t n = 0;
  n_chunks_ = 0;
  any_dense_ = false;
  for (const SeqTokens& b : batch) {
    const auto len = static_cast<int64_t>(b.tokens.size());
    const int64_t pos0 = kv.n_past(b.seq);
    const bool dense = dense_prompts && b.prompt;
    any_dense_ = any_dense_ || dense;
    ffn_chunks_[n_chunks_] = sparse::FfnChunk{len, dense};
    chunks_[n_chunks_++] = Chunk{b.seq, n, len, pos0, dense};
    for (int64_t t = 0; t < len; ++t, ++n) row_pos_[static_cast<size_t>(n)] = pos0 + t;
  }
  return n;
}

std::span<const AttentionChunk> PassLayout::attention_chunks(size_t il, KvCache& kv,
                                                             int64_t sparse_rows) {
  for (size_t i = 0; i < n_chunks_; ++i) {
    const Chunk& c = chunks_[i];
    attn_chunks_[i] = AttentionChunk{
        c.row0, c.n, c.pos0, kv.k(il, c.seq), kv.v(il, c.seq), !c.dense && c.n <= sparse_rows};
  }
  return {attn_chunks_.data(), n_chunks_};
}

}  // namespace hearth
