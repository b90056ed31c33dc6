// The rows of one forward pass: the chunks of several sequences one after the other, each at the
// end of its sequence, and every row's position. Internal to src/model/.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hearth/session.h"
#include "model/kv_cache.h"
#include "ops/attention_block.h"
#include "sparse/ffn_types.h"

namespace hearth {

class PassLayout {
 public:
  // One sequence's tokens in the pass: activation rows row0 .. row0 + n - 1, at positions
  // pos0 .. pos0 + n - 1 of the sequence. `dense`: a prompt's tokens in a session whose prompts
  // run dense (SeqTokens::prompt), which no sparse rule applies to, however few they are.
  struct Chunk {
    int32_t seq = 0;
    int64_t row0 = 0;
    int64_t n = 0;
    int64_t pos0 = 0;
    bool dense = false;
  };

  PassLayout() = default;
  PassLayout(int32_t n_seq, int32_t n_batch);

  // Lays out a checked batch (at most n_seq chunks and n_batch tokens) from row 0; returns its
  // rows. dense_prompts: chunks marked as prompts run dense (Chunk::dense).
  int64_t plan(std::span<const SeqTokens> batch, const KvCache& kv, bool dense_prompts = false);

  std::span<const Chunk> chunks() const { return {chunks_.data(), n_chunks_}; }
  // [chunks] each chunk's rows, for the FFN executor
  std::span<const sparse::FfnChunk> ffn_chunks() const { return {ffn_chunks_.data(), n_chunks_}; }
  bool any_dense() const { return any_dense_; }  // some chunk is Chunk::dense
  int64_t position(int64_t row) const { return row_pos_[static_cast<size_t>(row)]; }

  // The chunks with layer il's caches. Chunks of at most sparse_rows rows that are not dense are
  // marked sparse (their rows apply the layer's attention thresholds).
  std::span<const AttentionChunk> attention_chunks(size_t il, KvCache& kv, int64_t sparse_rows);

 private:
  std::vector<Chunk> chunks_;  // [n_seq] capacity; the pass uses n_chunks_
  size_t n_chunks_ = 0;
  bool any_dense_ = false;
  std::vector<sparse::FfnChunk> ffn_chunks_;  // [n_seq]
  std::vector<int64_t> row_pos_;             // [n_batch]
  std::vector<AttentionChunk> attn_chunks_;  // [n_seq]
};

}  // namespace hearth
