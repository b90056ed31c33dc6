// The host's KV cache of one session: per layer, n_seq sequences of n_ctx rows each, and how many
// tokens each sequence holds. Layers whose attention a device runs keep their caches there, and
// hold nothing here. Internal to src/model/.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "ops/attention.h"

namespace hearth {

class KvCache {
 public:
  KvCache() = default;
  // attn.n_ctx positions per sequence; host_layer[il]: whether layer il's cache lives here.
  KvCache(const AttentionParams& attn, int32_t n_seq, const std::vector<bool>& host_layer);

  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_seq() const { return static_cast<int32_t>(n_past_.size()); }
  // Fails unless 0 <= seq < n_seq.
  void check_seq(int32_t seq) const;
  // Fails unless sequence seq has room for n more tokens.
  void check_room(int32_t seq, size_t n) const;
  // The tokens sequence seq holds (checked).
  int32_t n_past(int32_t seq) const;
  // Sequence seq now holds n more tokens, whose rows the pass has written.
  void advance(int32_t seq, int64_t n) {
    n_past_[static_cast<size_t>(seq)] += static_cast<int32_t>(n);
  }
  // Sequence seq keeps its first n tokens (checked: at most what it holds). The rows past n stay
  // as they are: attention reads only rows below a sequence's n_past, and the next tokens
  // overwrite them.
  void truncate(int32_t seq, int32_t n);

  // Layer il's K and V rows of sequence seq (null where the layer's cache is on a device).
  void* k(size_t il, int32_t seq) { return at(k_[il], seq); }
  void* v(size_t il, int32_t seq) { return at(v_[il], seq); }

 private:
  void* at(const AlignedBuffer& layer, int32_t seq) const;

  int32_t n_ctx_ = 0;
  size_t seq_bytes_ = 0;          // one sequence's rows in one layer
  std::vector<int32_t> n_past_;   // [n_seq]
  std::vector<AlignedBuffer> k_;  // per layer [n_seq, n_ctx, n_head_kv, head_dim] (kv_type)
  std::vector<AlignedBuffer> v_;
};

}  // namespace hearth
